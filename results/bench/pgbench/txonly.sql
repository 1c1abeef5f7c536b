\set u random(1, 10000)
\startpipeline
BEGIN;
INSERT INTO t (user_id, amount, note) VALUES ('user-' || :u, 1250, 'coffee') RETURNING id;
\endpipeline
COMMIT;
