-- The operator's searches (store.KeyLister), as PostgreSQL's migration 006:
-- by key across scopes; by status and age; and by response code and age
-- (idem-gateway's stored unknown outcomes are 409s). InnoDB has no partial
-- index, so the last holds every record, not only the 4xx answers. The
-- primary key serves the search by scope, idempotency_keys_unfinished_idx
-- the unfinished records. One statement, so the migration is applied
-- whole or not at all.
-- made when: SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' AND index_name = 'idempotency_keys_key_idx'
ALTER TABLE idempotency_keys
    ADD KEY idempotency_keys_key_idx (idempotency_key),
    ADD KEY idempotency_keys_status_created_idx (status, created_at),
    ADD KEY idempotency_keys_answered_idx (response_code, created_at);
