-- What a balance's pending payouts hold of the balance limit (pgledger's
-- migration 006 says why). Payouts pending when this runs reserve what
-- they hold.
ALTER TABLE balances ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0);

UPDATE balances SET reserved = (
    SELECT coalesce(sum(p.amount), 0) FROM payouts p
     WHERE p.user_id = balances.user_id AND p.currency = balances.currency AND p.status = 'pending');
