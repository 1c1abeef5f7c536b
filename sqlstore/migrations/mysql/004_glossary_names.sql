-- The glossary's names (docs/glossary.md): the token fences every write, in
-- every mode, so it is the fencing token; the attempt claimed the key at
-- claimed_at; leased mode's hold ends at lease_expires_at. RENAME COLUMN (MariaDB 10.5, MySQL
-- 8.0) changes no row, and rewrites unfinished_at's expression to the new
-- name. One statement, so the migration is applied whole or not at all.
-- made when: SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' AND column_name = 'fencing_token'
ALTER TABLE idempotency_keys
    RENAME COLUMN lock_token TO fencing_token,
    RENAME COLUMN locked_at TO claimed_at,
    RENAME COLUMN lock_expires_at TO lease_expires_at;
