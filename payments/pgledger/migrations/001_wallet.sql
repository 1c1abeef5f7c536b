-- The wallet: users and their API keys, balances, deposits, transactions
-- and the ledger entries they make. Every table is keyed by user_id first,
-- so the schema can be distributed by user (api_keys, looked up by key
-- hash before the user is known, would be a reference table).

CREATE TABLE users (
    id         uuid        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is kept: a 256-bit random key needs no salt.
CREATE TABLE api_keys (
    key_hash   bytea       PRIMARY KEY CHECK (length(key_hash) = 32),
    user_id    uuid        NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);

-- A balance is the sum of its ledger entries, kept here and updated in the
-- same transaction as they are.
CREATE TABLE balances (
    user_id    uuid        NOT NULL REFERENCES users (id),
    currency   text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount     bigint      NOT NULL CHECK (amount >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, currency)
);

CREATE TABLE deposits (
    user_id         uuid        NOT NULL REFERENCES users (id),
    id              uuid        NOT NULL,
    currency        text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount          bigint      NOT NULL CHECK (amount > 0),
    -- The key net: NULL once ReleaseExpiredKeys frees the key.
    idempotency_key text        CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id)
);
CREATE UNIQUE INDEX deposits_key_net ON deposits (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE transactions (
    user_id          uuid        NOT NULL REFERENCES users (id),
    id               uuid        NOT NULL,
    source_currency  text        NOT NULL CHECK (source_currency ~ '^[A-Z]{3}$'),
    target_currency  text        NOT NULL CHECK (target_currency ~ '^[A-Z]{3}$'),
    amount           bigint      NOT NULL CHECK (amount > 0),
    converted_amount bigint      NOT NULL CHECK (converted_amount > 0),
    -- Target units per source major unit, exactly as applied.
    rate             numeric     NOT NULL CHECK (rate > 0),
    status           text        NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    -- The key net: NULL once ReleaseExpiredKeys frees the key.
    idempotency_key  text        CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id),
    CHECK (source_currency <> target_currency)
);
CREATE UNIQUE INDEX transactions_key_net ON transactions (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The minute net: one live transaction per user, currency pair and amount
-- per UTC calendar minute. date_trunc on a timestamptz is only STABLE and
-- cannot be indexed; on the timestamp AT TIME ZONE 'UTC' it is IMMUTABLE.
CREATE UNIQUE INDEX transactions_minute_net ON transactions
    (user_id, source_currency, target_currency, amount, date_trunc('minute', created_at AT TIME ZONE 'UTC'))
    WHERE status NOT IN ('CANCELLED', 'FAILED');

-- Each row changes one balance: a deposit's credit, or a transaction's
-- debit (negative) or credit.
CREATE TABLE ledger_entries (
    user_id        uuid        NOT NULL,
    id             bigint      GENERATED ALWAYS AS IDENTITY,
    currency       text        NOT NULL,
    amount         bigint      NOT NULL CHECK (amount <> 0),
    deposit_id     uuid,
    transaction_id uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, currency) REFERENCES balances (user_id, currency),
    FOREIGN KEY (user_id, deposit_id) REFERENCES deposits (user_id, id),
    FOREIGN KEY (user_id, transaction_id) REFERENCES transactions (user_id, id),
    CHECK (num_nonnulls(deposit_id, transaction_id) = 1)
);
CREATE INDEX ledger_entries_deposit_idx ON ledger_entries (user_id, deposit_id) WHERE deposit_id IS NOT NULL;
CREATE INDEX ledger_entries_transaction_idx ON ledger_entries (user_id, transaction_id) WHERE transaction_id IS NOT NULL;
