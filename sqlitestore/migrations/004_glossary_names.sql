-- The glossary's names (docs/glossary.md): the token fences every write, in
-- every mode, so it is the fencing token; the attempt claimed the key at
-- claimed_at; leased mode's hold ends at lease_expires_at. RENAME COLUMN (SQLite 3.25) carries
-- the partial index idempotency_keys_unfinished_idx along.
ALTER TABLE idempotency_keys RENAME COLUMN lock_token TO fencing_token;
ALTER TABLE idempotency_keys RENAME COLUMN locked_at TO claimed_at;
ALTER TABLE idempotency_keys RENAME COLUMN lock_expires_at TO lease_expires_at;
