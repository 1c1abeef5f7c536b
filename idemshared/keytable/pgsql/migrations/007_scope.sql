-- The glossary's name for the user a key belongs to (docs/glossary.md):
-- the middleware's scope, which a door may set to anything (a user, a
-- tenant, an API client), so the key table and the audit log call it
-- scope; the ledger keeps user_id, where it is a user. A rename is a
-- catalog change: no row is rewritten, and the primary key, the indexes
-- and a partitioned table's partition key follow the column.
ALTER TABLE idempotency_keys RENAME COLUMN user_id TO scope;
ALTER TABLE idempotency_keys_audit RENAME COLUMN user_id TO scope;
