-- Payouts: money sent out of a balance to an account at the bank. The
-- payout is debited when it is made (a ledger entry), pending until the
-- bank's outcome is known, then paid, or failed and refunded (a second
-- entry, never a delete).
CREATE TABLE payouts (
    user_id          TEXT    NOT NULL REFERENCES users (id),
    id               TEXT    NOT NULL,
    currency         TEXT    NOT NULL CHECK (currency GLOB '[A-Z][A-Z][A-Z]'),
    amount           INTEGER NOT NULL CHECK (amount > 0),
    destination      TEXT    NOT NULL CHECK (length(destination) BETWEEN 1 AND 255),
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
    -- The key the payout is sent to the bank with (idem.ProviderKey): one
    -- per payout, derived from the request's key and its record's life.
    bank_key         TEXT    NOT NULL UNIQUE,
    bank_transfer_id TEXT,
    -- The request's Idempotency-Key, as plain data for support.
    idempotency_key  TEXT    CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (user_id, id),
    CHECK (status <> 'paid' OR bank_transfer_id IS NOT NULL)
) STRICT;

-- SQLite cannot change a CHECK: the entries move to a table whose CHECK
-- names the payout too.
CREATE TABLE ledger_entries_new (
    id             INTEGER NOT NULL PRIMARY KEY,
    user_id        TEXT    NOT NULL,
    currency       TEXT    NOT NULL,
    amount         INTEGER NOT NULL CHECK (amount <> 0),
    deposit_id     TEXT,
    transaction_id TEXT,
    payout_id      TEXT,
    created_at     INTEGER NOT NULL,
    FOREIGN KEY (user_id, currency) REFERENCES balances (user_id, currency),
    FOREIGN KEY (user_id, deposit_id) REFERENCES deposits (user_id, id),
    FOREIGN KEY (user_id, transaction_id) REFERENCES transactions (user_id, id),
    FOREIGN KEY (user_id, payout_id) REFERENCES payouts (user_id, id),
    CHECK ((deposit_id IS NOT NULL) + (transaction_id IS NOT NULL) + (payout_id IS NOT NULL) = 1)
) STRICT;
INSERT INTO ledger_entries_new (id, user_id, currency, amount, deposit_id, transaction_id, created_at)
SELECT id, user_id, currency, amount, deposit_id, transaction_id, created_at FROM ledger_entries;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_new RENAME TO ledger_entries;
CREATE INDEX ledger_entries_user_idx ON ledger_entries (user_id, currency);
CREATE INDEX ledger_entries_deposit_idx ON ledger_entries (user_id, deposit_id) WHERE deposit_id IS NOT NULL;
CREATE INDEX ledger_entries_transaction_idx ON ledger_entries (user_id, transaction_id) WHERE transaction_id IS NOT NULL;
CREATE INDEX ledger_entries_payout_idx ON ledger_entries (user_id, payout_id) WHERE payout_id IS NOT NULL;
