-- SPDX-License-Identifier: MIT
-- A sqlite3 script with enough work to allocate: a table of 20,000 rows, an
-- index, grouped queries and a text aggregate.
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, i % 97, printf('row-%05d', i) FROM n;
CREATE INDEX t_k ON t(k);
SELECT k, count(*), sum(id) FROM t WHERE k < 5 GROUP BY k ORDER BY k;
SELECT length(group_concat(name, ',')) FROM t WHERE k = 42;
UPDATE t SET name = upper(name) WHERE id % 3 = 0;
DELETE FROM t WHERE k > 90;
SELECT count(*), min(name), max(name) FROM t;
