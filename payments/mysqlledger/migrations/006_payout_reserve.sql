-- What a balance's pending payouts hold of the balance limit (pgledger's
-- migration 006 says why). Payouts pending when this runs reserve what
-- they hold. The ALTER is one statement, applied whole or not at all; the
-- UPDATE recomputes, so running it again changes nothing.
ALTER TABLE balances
    ADD COLUMN reserved BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT balances_reserved_check CHECK (reserved >= 0);

UPDATE balances b
  JOIN (SELECT user_id, currency, SUM(amount) AS total FROM payouts WHERE status = 'pending' GROUP BY user_id, currency) p
    ON b.user_id = p.user_id AND b.currency = p.currency
   SET b.reserved = p.total;
