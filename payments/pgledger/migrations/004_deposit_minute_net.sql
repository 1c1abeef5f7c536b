-- The minute net on deposits, as transactions have it: at most one deposit
-- per user, currency and amount per UTC calendar minute, so the same
-- deposit sent several times with several keys (or none) credits once.
-- The minute is a calendar minute, not a sliding window: two identical
-- deposits a few milliseconds apart across a minute boundary both go in.
-- date_trunc on a timestamptz is only STABLE and cannot be indexed; on the
-- timestamp AT TIME ZONE 'UTC' it is IMMUTABLE.
--
-- A database that already holds identical deposits in one minute (made
-- before this net existed) fails here with the index's name: those rows
-- are the double credits the net prevents, to be reviewed first.
CREATE UNIQUE INDEX deposits_minute_net ON deposits
    (user_id, currency, amount, date_trunc('minute', created_at AT TIME ZONE 'UTC'));
