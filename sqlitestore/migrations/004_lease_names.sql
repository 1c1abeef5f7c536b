-- The glossary's names: what a claim holds its key with is a lease, so its
-- columns say lease (docs/glossary.md). RENAME COLUMN (SQLite 3.25) carries
-- the partial index idempotency_keys_unfinished_idx along.
ALTER TABLE idempotency_keys RENAME COLUMN lock_token TO lease_token;
ALTER TABLE idempotency_keys RENAME COLUMN locked_at TO leased_at;
ALTER TABLE idempotency_keys RENAME COLUMN lock_expires_at TO lease_expires_at;
