-- The business tables no longer bind Idempotency-Keys: whether a request
-- runs is the idem middleware's decision, on its own key record. A unique
-- index here outlived that record's retention (and depended on how it was
-- swept), so a key past retention could meet a stale binding and get a
-- stored 409. The idempotency_key column stays, as plain data for support.
DROP INDEX deposits_key_net;
DROP INDEX transactions_key_net;
