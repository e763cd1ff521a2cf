-- Timelines that are no longer active: the newest engine offset of each
-- partition when publishing moved on (-1: the partition never held an event),
-- and when the timeline's topic was removed after its retention ended.
ALTER TABLE timelines ADD COLUMN last_offsets bigint[];
ALTER TABLE timelines ADD COLUMN cleaned_up_at timestamptz;
