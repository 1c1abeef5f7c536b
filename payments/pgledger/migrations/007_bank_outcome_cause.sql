-- Why a pending payout's bank outcome is unknown, for the person who
-- resolves it (docs/payouts.md): the cause of the last bank call that got
-- no outcome (timeout, reset, no-answer, cut-answer, bank-error). NULL
-- while no call has failed, and once the payout is paid or failed.
ALTER TABLE payouts ADD COLUMN bank_outcome_cause text
    CONSTRAINT payouts_bank_outcome_cause_check CHECK (status = 'pending' OR bank_outcome_cause IS NULL);
