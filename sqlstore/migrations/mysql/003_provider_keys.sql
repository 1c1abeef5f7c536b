-- The keys a handler split into phases sends downstream (idem.ProviderKey),
-- by provider, recorded with a recovery point and never changed after: a
-- retry or the completer resends the key the provider may have received,
-- whatever the secret it was derived with is now. NULL for none; cleared
-- with the recovery point when the record starts a new life. (MariaDB's
-- JSON is LONGTEXT; the check keeps it an object on both servers.)
-- made when: SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' AND column_name = 'provider_keys'
ALTER TABLE idempotency_keys
    ADD COLUMN provider_keys JSON NULL,
    ADD CONSTRAINT idempotency_keys_provider_keys
        CHECK (provider_keys IS NULL OR JSON_TYPE(provider_keys) = 'OBJECT');
