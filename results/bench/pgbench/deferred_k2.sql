\set u random(1, 10000)
\set k random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO t (user_id, amount, note) VALUES ('user-' || :u, 1250, 'coffee') RETURNING id;
\endpipeline
\startpipeline
SET LOCAL lock_timeout = '5000ms';
WITH claimed AS (INSERT INTO k2 (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version, status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at, response_code, response_headers, response_body, resource_type, resource_id) VALUES ('user-' || :u, 'key-' || :client_id || '-' || :k, 'POST', '/v1/trivial', '\x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'::bytea, 1, 'COMPLETED', 1, gen_random_uuid(), now(), now(), now(), now() + 86400000000 * interval '1 microsecond', 201, '{"Content-Type":["application/json"]}'::text::jsonb, '\x7b226964223a3132333435362c22616d6f756e74223a313235302c226e6f7465223a22636f66666565227d'::bytea, nullif('', ''), nullif('', '')) ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING 1) SELECT 1 / count(*) FROM claimed;
COMMIT;
\endpipeline
