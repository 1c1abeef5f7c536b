-- The keys a handler split into phases sends downstream (idem.ProviderKey),
-- by provider, recorded with a recovery point and never changed after: a
-- retry or the completer resends the key the provider may have received,
-- whatever the secret it was derived with is now. NULL for none; cleared
-- with the recovery point when the record starts a new life.
ALTER TABLE idempotency_keys ADD COLUMN provider_keys jsonb
    CHECK (provider_keys IS NULL OR jsonb_typeof(provider_keys) = 'object');
