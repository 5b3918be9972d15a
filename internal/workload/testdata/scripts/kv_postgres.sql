-- A key-value mix in the style of a replayed production workload:
-- point reads by readers, read-modify-write transactions by writers.
-- param id 1 20000
-- param delta -5 5
-- setup
DROP TABLE IF EXISTS kv;
CREATE TABLE kv (id int PRIMARY KEY, v bigint NOT NULL, note text NOT NULL);
INSERT INTO kv SELECT g, 0, md5(g::text) FROM generate_series(1, 20000) g;
ANALYZE kv;
-- reader
SELECT v, note FROM kv WHERE id = :id;
SELECT sum(v) FROM kv WHERE id BETWEEN :id AND :id + 20;
-- writer
BEGIN;
SELECT v FROM kv WHERE id = :id FOR UPDATE;
UPDATE kv SET v = v + :delta WHERE id = :id;
COMMIT;
