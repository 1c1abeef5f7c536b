-- What a balance's pending payouts hold of the balance limit: a payout's
-- amount moves from amount to reserved when it is debited, and back to
-- amount when it is refunded, so a credit is refused when amount +
-- reserved would pass the limit and a refund never is. Payouts pending
-- when this runs reserve what they hold.
ALTER TABLE balances ADD COLUMN reserved bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0);

UPDATE balances b SET reserved = p.total
  FROM (SELECT user_id, currency, sum(amount) AS total FROM payouts WHERE status = 'pending' GROUP BY user_id, currency) p
 WHERE b.user_id = p.user_id AND b.currency = p.currency;
