-- Weft session store, SQLite, version 2: events that repeat messages of the log (message_end,
-- error, step_end, session_end) are stored without them. `msg_first` and `msg_count` name the
-- positions (messages.idx) of the messages left out of `event`; both are NULL for an event
-- stored whole. A reader puts the messages back from the `messages` table.

ALTER TABLE events ADD COLUMN msg_first INTEGER;
ALTER TABLE events ADD COLUMN msg_count INTEGER;
