-- Where each line of a chunk ends (engine.line_ends: little-endian 32-bit integers,
-- one per event), so that a reader cuts a chunk where a batch ends as a window of
-- its text instead of splitting it into events (engine.Lines). NULL for chunks
-- written before, and for those compaction rewrote: readers split those.
ALTER TABLE log_chunks ADD COLUMN line_ends bytea;
