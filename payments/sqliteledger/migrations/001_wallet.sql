-- The wallet: users and their API keys, balances, deposits, transactions
-- and the ledger entries they make. The tables and columns are pgledger's;
-- the types are SQLite's, in STRICT tables so a value of the wrong type is
-- refused rather than stored.
--
-- Times are INTEGER microseconds since the Unix epoch, UTC, as in
-- sqlitestore's key table.

CREATE TABLE users (
    id         TEXT    NOT NULL PRIMARY KEY,
    created_at INTEGER NOT NULL
) STRICT;

-- Only the SHA-256 of a key is kept: a 256-bit random key needs no salt.
CREATE TABLE api_keys (
    key_hash   BLOB    NOT NULL PRIMARY KEY CHECK (length(key_hash) = 32),
    user_id    TEXT    NOT NULL REFERENCES users (id),
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);

-- A balance is the sum of its ledger entries, kept here and updated in the
-- same transaction as they are.
CREATE TABLE balances (
    user_id    TEXT    NOT NULL REFERENCES users (id),
    currency   TEXT    NOT NULL CHECK (currency GLOB '[A-Z][A-Z][A-Z]'),
    amount     INTEGER NOT NULL CHECK (amount >= 0),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, currency)
) STRICT, WITHOUT ROWID;

CREATE TABLE deposits (
    user_id         TEXT    NOT NULL REFERENCES users (id),
    id              TEXT    NOT NULL,
    currency        TEXT    NOT NULL CHECK (currency GLOB '[A-Z][A-Z][A-Z]'),
    amount          INTEGER NOT NULL CHECK (amount > 0),
    -- The key net: NULL once the key is released.
    idempotency_key TEXT    CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (user_id, id)
) STRICT;
CREATE UNIQUE INDEX deposits_key_net ON deposits (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE transactions (
    user_id          TEXT    NOT NULL REFERENCES users (id),
    id               TEXT    NOT NULL,
    source_currency  TEXT    NOT NULL CHECK (source_currency GLOB '[A-Z][A-Z][A-Z]'),
    target_currency  TEXT    NOT NULL CHECK (target_currency GLOB '[A-Z][A-Z][A-Z]'),
    amount           INTEGER NOT NULL CHECK (amount > 0),
    converted_amount INTEGER NOT NULL CHECK (converted_amount > 0),
    -- Target units per source major unit, exactly as applied, as text:
    -- SQLite has no exact decimal type.
    rate             TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    -- The key net: NULL once the key is released.
    idempotency_key  TEXT    CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (user_id, id),
    CHECK (source_currency <> target_currency)
) STRICT;
CREATE UNIQUE INDEX transactions_key_net ON transactions (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The minute net: one live transaction per user, currency pair and amount
-- per UTC calendar minute (created_at is in microseconds).
CREATE UNIQUE INDEX transactions_minute_net ON transactions
    (user_id, source_currency, target_currency, amount, created_at / 60000000)
    WHERE status NOT IN ('CANCELLED', 'FAILED');

-- Each row changes one balance: a deposit's credit, or a transaction's
-- debit (negative) or credit.
CREATE TABLE ledger_entries (
    id             INTEGER NOT NULL PRIMARY KEY,
    user_id        TEXT    NOT NULL,
    currency       TEXT    NOT NULL,
    amount         INTEGER NOT NULL CHECK (amount <> 0),
    deposit_id     TEXT,
    transaction_id TEXT,
    created_at     INTEGER NOT NULL,
    FOREIGN KEY (user_id, currency) REFERENCES balances (user_id, currency),
    FOREIGN KEY (user_id, deposit_id) REFERENCES deposits (user_id, id),
    FOREIGN KEY (user_id, transaction_id) REFERENCES transactions (user_id, id),
    CHECK ((deposit_id IS NULL) <> (transaction_id IS NULL))
) STRICT;
CREATE INDEX ledger_entries_user_idx ON ledger_entries (user_id, currency);
CREATE INDEX ledger_entries_deposit_idx ON ledger_entries (user_id, deposit_id) WHERE deposit_id IS NOT NULL;
CREATE INDEX ledger_entries_transaction_idx ON ledger_entries (user_id, transaction_id) WHERE transaction_id IS NOT NULL;
