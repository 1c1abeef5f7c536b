-- Payouts: money sent out of a balance to an account at the bank. The
-- payout is debited when it is made (a ledger entry), pending until the
-- bank's outcome is known, then paid, or failed and refunded (a second
-- entry, never a delete).
CREATE TABLE payouts (
    user_id          uuid        NOT NULL REFERENCES users (id),
    id               uuid        NOT NULL,
    currency         text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount           bigint      NOT NULL CHECK (amount > 0),
    destination      text        NOT NULL CHECK (length(destination) BETWEEN 1 AND 255),
    status           text        NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
    -- The key the payout is sent to the bank with (idem.ProviderKey): one
    -- per payout, derived from the request's key and its record's life.
    bank_key         text        NOT NULL UNIQUE,
    bank_transfer_id text,
    -- The request's Idempotency-Key, as plain data for support.
    idempotency_key  text        CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id),
    CHECK (status <> 'paid' OR bank_transfer_id IS NOT NULL)
);

ALTER TABLE ledger_entries ADD COLUMN payout_id uuid;
ALTER TABLE ledger_entries ADD FOREIGN KEY (user_id, payout_id) REFERENCES payouts (user_id, id);
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_one_movement
    CHECK (num_nonnulls(deposit_id, transaction_id, payout_id) = 1);
CREATE INDEX ledger_entries_payout_idx ON ledger_entries (user_id, payout_id) WHERE payout_id IS NOT NULL;
