-- The glossary's name for the user a key belongs to (docs/glossary.md):
-- the middleware's scope, which a door may set to anything (a user, a
-- tenant, an API client). RENAME COLUMN (MariaDB 10.5, MySQL 8.0) changes
-- no row; the primary key follows the column.
-- made when: SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' AND column_name = 'scope'
ALTER TABLE idempotency_keys RENAME COLUMN user_id TO scope;
