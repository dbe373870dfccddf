-- Weft session store, Postgres, version 2.
--
-- Events that repeat messages of the log (message_end, error, step_end, session_end) are stored
-- without them. `msg_first` and `msg_count` name the positions (messages.idx) of the messages
-- left out of `event`; both are NULL for an event stored whole. A reader puts the messages back
-- from the `messages` table.
ALTER TABLE events ADD COLUMN msg_first BIGINT, ADD COLUMN msg_count BIGINT;

-- The foreign key from events to sessions is checked once per inserted row, which cost about
-- half of every append (9.6 µs a row). Every write of events already locks its session's row
-- (SELECT … FOR UPDATE) and fails when the session is gone, and deleting a session deletes its
-- events in the same transaction, so the key guards nothing the store does not.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_session_id_fkey;
