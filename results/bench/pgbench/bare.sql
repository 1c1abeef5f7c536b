\set u random(1, 10000)
INSERT INTO t (user_id, amount, note) VALUES ('user-' || :u, 1250, 'coffee') RETURNING id;
