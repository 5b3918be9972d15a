-- The same key-value mix for MySQL/MariaDB (InnoDB).
-- param id 1 20000
-- param delta -5 5
-- setup
DROP TABLE IF EXISTS kv;
CREATE TABLE kv (id int PRIMARY KEY, v bigint NOT NULL, note varchar(64) NOT NULL) ENGINE=InnoDB;
-- 20 000 rows from a table of digits (recursive CTEs stop at 1000 rows by default).
CREATE TEMPORARY TABLE digits (d int PRIMARY KEY);
INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
INSERT INTO kv (id, v, note)
  SELECT n, 0, md5(n) FROM (
    SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n
    FROM digits a, digits b, digits c, digits e, digits f WHERE f.d < 2) g;
DROP TEMPORARY TABLE digits;
ANALYZE TABLE kv;
-- reader
SELECT v, note FROM kv WHERE id = :id;
SELECT sum(v) FROM kv WHERE id BETWEEN :id AND :id + 20;
-- writer
BEGIN;
SELECT v FROM kv WHERE id = :id FOR UPDATE;
UPDATE kv SET v = v + :delta WHERE id = :id;
COMMIT;
