-- The glossary's names: what a claim holds its key with is a lease, so its
-- columns say lease (docs/glossary.md). RENAME COLUMN (MariaDB 10.5, MySQL
-- 8.0) changes no row, and rewrites unfinished_at's expression to the new
-- name. One statement, so the migration is applied whole or not at all.
ALTER TABLE idempotency_keys
    RENAME COLUMN lock_token TO lease_token,
    RENAME COLUMN locked_at TO leased_at,
    RENAME COLUMN lock_expires_at TO lease_expires_at;
