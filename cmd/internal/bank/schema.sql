-- A transfer is written once and never changed: the answer a retry gets is
-- the row's stored response, byte for byte.
CREATE TABLE IF NOT EXISTS transfers (
    seq             INTEGER PRIMARY KEY,            -- insertion order, for listings
    id              TEXT    NOT NULL UNIQUE,
    idempotency_key TEXT    NOT NULL UNIQUE,
    fingerprint     BLOB    NOT NULL,               -- SHA-256 of the request's fields
    status          TEXT    NOT NULL CHECK (status IN ('settled', 'rejected')),
    amount          INTEGER NOT NULL CHECK (amount > 0),
    currency        TEXT    NOT NULL,
    destination     TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    response_code   INTEGER NOT NULL,
    response_body   BLOB    NOT NULL
) STRICT;
