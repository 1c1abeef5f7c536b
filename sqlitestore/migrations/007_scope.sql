-- The glossary's name for the user a key belongs to (docs/glossary.md):
-- the middleware's scope, which a door may set to anything (a user, a
-- tenant, an API client). RENAME COLUMN (SQLite 3.25) rewrites the
-- schema's text, not the rows; the indexes follow the column.
ALTER TABLE idempotency_keys RENAME COLUMN user_id TO scope;
ALTER TABLE idempotency_keys_audit RENAME COLUMN user_id TO scope;
