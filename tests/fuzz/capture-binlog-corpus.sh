#!/usr/bin/env bash
# Captures the seed corpus of the mysql_binlog fuzz target
# (tests/fuzz/corpus/mysql_binlog/) from a throwaway MariaDB
# (tests/tools/mariadb-sandbox.sh): Clusterpedia's writes to `resources`
# as the collector makes them on MySQL, each its own transaction, then the
# binlog file cut into one small binlog file per write (the magic number, the
# file's FORMAT_DESCRIPTION, the write's events), as a server streams them.
#
# MariaDB writes v1 row events (WRITE/UPDATE/DELETE_ROWS_EVENT_V1); MySQL 8
# writes v2 (WRITE/UPDATE/DELETE_ROWS_EVENT: a 2-byte extra-data length
# after the post-header, and UPDATE's after-image bitmap). The v2 seeds are
# made from the v1 ones by that rewrite, with their CRC32 recomputed.
#
#   tests/fuzz/capture-binlog-corpus.sh [OUT_DIR]
#       default OUT_DIR: tests/fuzz/corpus/mysql_binlog (files replaced)
#
# Needs mariadb-server and python3. Leaves nothing behind: the sandbox is
# stopped and its directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${1:-tests/fuzz/corpus/mysql_binlog}

DIR=$(mktemp -d /tmp/ww-capture.XXXXXX)
chmod 755 "$DIR"
trap '"$ROOT/tests/tools/mariadb-sandbox.sh" stop "$DIR/db" >/dev/null 2>&1 || true; rm -rf -- "$DIR"' EXIT
eval "$("$ROOT/tests/tools/mariadb-sandbox.sh" start "$DIR/db")"
my() { mariadb --no-defaults --socket="$WALWATCH_TEST_MYSOCKET" -uroot "$@"; }
my -e 'CREATE DATABASE clusterpedia CHARACTER SET utf8mb4; CREATE TABLE clusterpedia.other (id int PRIMARY KEY, v text)'
my clusterpedia <"$ROOT/schema/mysql/clusterpedia.sql"
my -e 'FLUSH BINARY LOGS'  # the writes start a file of their own

obj() {  # obj NAME UID RV [EXTRA_JSON]
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default","uid":"%s","resourceVersion":"%s","labels":{"app":"web"},"annotations":{"shadow.clusterpedia.io/cluster-name":"c1"}}%s}' \
    "$1" "$2" "$3" "${4:-}"
}
# shellcheck disable=SC2016  # backquotes: SQL identifiers
cols='`group`,`version`,`resource`,`kind`,`cluster`,`namespace`,`name`,`owner_uid`,`uid`,`resource_version`,`object`,`events`,`event_resource_versions`,`created_at`,`synced_at`,`deleted_at`'
where() { echo "WHERE \`resources\`.\`cluster\` = 'c1' AND \`resources\`.\`group\` = '' AND \`resources\`.\`name\` = '$1' AND \`resources\`.\`namespace\` = 'default' AND \`resources\`.\`resource\` = 'pods' AND \`resources\`.\`version\` = 'v1'"; }
insert() {  # insert NAME UID RV [DELETED_AT]
  echo "INSERT INTO \`resources\` ($cols) VALUES ('','v1','pods','Pod','c1','default','$1','','$2','$3','$(obj "$1" "$2" "$3")',NULL,NULL,'2026-12-06 10:00:00.123','2026-12-06 10:00:00.456',${4:-NULL});"
}

# One write per line: NAME<TAB>SQL (one transaction each).
writes=$(cat <<SQL
insert	$(insert web-1 u-1 101)
update	UPDATE \`resources\` SET \`created_at\`='2026-12-06 10:00:00.123',\`object\`='$(obj web-1 u-1 102 ',"spec":{"nodeName":"node-1 é"}')',\`owner_uid\`='',\`resource_version\`='102',\`uid\`='u-1',\`synced_at\`='2026-12-06 10:00:01.000' $(where web-1);
event	UPDATE \`resources\` SET \`event_resource_versions\`=JSON_SET(COALESCE(\`event_resource_versions\`, '{}'), '\$."default/web-1.a1"', 103),\`events\`=JSON_SET(COALESCE(\`events\`, '{}'), '\$."e-1"', JSON_EXTRACT('{"reason":"Pulled","count":1}', '\$')) WHERE \`resources\`.\`cluster\` = 'c1' AND \`resources\`.\`uid\` = 'u-1';
terminating	UPDATE \`resources\` SET \`created_at\`='2026-12-06 10:00:00.123',\`deleted_at\`='2026-12-06 10:00:30.000',\`object\`='$(obj web-1 u-1 104)',\`owner_uid\`='rs-1',\`resource_version\`='104',\`uid\`='u-1',\`synced_at\`='2026-12-06 10:00:02.000' $(where web-1);
recreate	UPDATE \`resources\` SET \`created_at\`='2026-12-06 10:01:00.000',\`object\`='$(obj web-1 u-2 105)',\`owner_uid\`='',\`resource_version\`='105',\`uid\`='u-2',\`synced_at\`='2026-12-06 10:01:00.000' $(where web-1);
delete	DELETE FROM \`resources\` $(where web-1);
two-in-one	BEGIN; $(insert web-2 u-3 106) UPDATE \`resources\` SET \`object\`='$(obj web-2 u-3 107)',\`resource_version\`='107' $(where web-2); $(insert web-3 u-4 108 "'2026-12-06 10:02:00.000'") COMMIT;
cluster-removal	BEGIN; $(insert web-4 u-5 109) $(insert web-5 u-6 110) COMMIT; DELETE FROM \`resources\` WHERE \`resources\`.\`cluster\` = 'c1';
other-table	INSERT INTO other VALUES (1, 'x');
truncate	TRUNCATE TABLE \`resources\`;
wide-ddl	ALTER TABLE \`resources\` ADD COLUMN \`t_tiny\` tinyint, ADD COLUMN \`t_utiny\` tinyint unsigned, ADD COLUMN \`t_small\` smallint, ADD COLUMN \`t_med\` mediumint, ADD COLUMN \`t_int\` int unsigned, ADD COLUMN \`t_big\` bigint, ADD COLUMN \`t_dec\` decimal(20,6), ADD COLUMN \`t_float\` float, ADD COLUMN \`t_double\` double, ADD COLUMN \`t_date\` date, ADD COLUMN \`t_time\` time(3), ADD COLUMN \`t_ts\` timestamp(6) NULL, ADD COLUMN \`t_year\` year, ADD COLUMN \`t_bit\` bit(12), ADD COLUMN \`t_enum\` enum('a','b','c'), ADD COLUMN \`t_set\` set('x','y','z'), ADD COLUMN \`t_char\` char(10), ADD COLUMN \`t_binary\` binary(4), ADD COLUMN \`t_blob\` blob, ADD COLUMN \`t_text\` mediumtext;
wide-insert	$(insert web-6 u-7 111 | sed 's/;$//' | sed "s/(\`group\`/(\`t_tiny\`,\`t_utiny\`,\`t_small\`,\`t_med\`,\`t_int\`,\`t_big\`,\`t_dec\`,\`t_float\`,\`t_double\`,\`t_date\`,\`t_time\`,\`t_ts\`,\`t_year\`,\`t_bit\`,\`t_enum\`,\`t_set\`,\`t_char\`,\`t_binary\`,\`t_blob\`,\`t_text\`,\`group\`/; s/VALUES (/VALUES (-5,250,-300,-70000,4000000000,-9000000000000,-12345.678901,1.5,-2.25e100,'2026-12-06','-12:34:56.789','2026-12-06 10:00:00.123456',2026,b'101010101010','b','x,z','chars','ab',x'00ff10','text é',/");
wide-update	UPDATE \`resources\` SET \`t_tiny\`=NULL, \`t_dec\`=0.5, \`t_enum\`='c', \`t_blob\`=NULL, \`object\`='$(obj web-6 u-7 112)', \`resource_version\`='112' $(where web-6);
wide-delete	DELETE FROM \`resources\` $(where web-6);
SQL
)

before=$(my -N -e 'SHOW MASTER STATUS' | awk '{print $1}')
names=()
while IFS=$'\t' read -r name sql; do
  names+=("$name")
  my clusterpedia -e "$sql"
  # A marker between writes, in another database's table, so that the cut
  # below knows which events each write made: one transaction of its own.
  my clusterpedia -e "INSERT INTO other VALUES (${#names[@]} + 1000, 'mark:$name')"
done <<<"$writes"
my -e 'FLUSH BINARY LOGS'

mkdir -p "$OUT"
# mysql8.binlog is not captured: tests/unit/mysql8_binlog_test.cc writes it.
find "$OUT" -maxdepth 1 -name '*.binlog' ! -name 'mysql8.binlog' -delete
python3 - "$DIR/db/binlog/$before" "$OUT" "${names[@]}" <<'PY'
import struct, sys, zlib

path, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(path, 'rb').read()
assert data[:4] == b'\xfebin'
events, at = [], 4
while at < len(data):
    length = struct.unpack_from('<I', data, at + 9)[0]
    events.append(data[at:at + length])
    at += length
typ = lambda e: e[4]
fde = [e for e in events if typ(e) == 15][0]
# The FDE's checksum byte: its last 5 bytes are alg + CRC32.
checksum = fde[-5] == 1

# Transactions: GTID (162) ... XID (16) or a standalone statement.
groups, cur = [], None
for e in events:
    if typ(e) == 162:
        cur = [e]
        groups.append(cur)
    elif cur is not None:
        cur.append(e)

def is_marker(g):
    return any(typ(e) == 2 and b"mark:" in e for e in g) or any(b"mark:" in e for e in g if typ(e) in (23, 24, 25))

# Cut by the markers: the groups before each marker are that write's.
writes, pending = {}, []
order = iter(names)
for g in groups:
    if is_marker(g):
        writes[next(order)] = pending
        pending = []
    else:
        pending.append(g)

def fix(e):
    """Rewrites the length (and CRC32) of event `e` after a change."""
    e = bytearray(e)
    struct.pack_into('<I', e, 9, len(e))
    if checksum:
        struct.pack_into('<I', e, len(e) - 4, zlib.crc32(bytes(e[:-4])) & 0xffffffff)
    return bytes(e)

def to_v2(e):
    """A MariaDB v1 ROWS event as MySQL 8 writes it (v2)."""
    t = typ(e)
    if t not in (23, 24, 25):
        return e
    e = bytearray(e)
    e[4] = t + 7  # 23..25 -> 30..32
    e[19 + 8:19 + 8] = struct.pack('<H', 2)  # extra data: just its length
    return fix(e)

def write(name, groups, v2=False):
    # Without ANNOTATE_ROWS (the statement's text): a dump sends them only
    # to a replica that asks (MARIADB_RPL_BINLOG_SEND_ANNOTATE_ROWS), and
    # walwatch does not.
    body = b''.join(to_v2(e) if v2 else e for g in groups for e in g
                    if typ(e) != 160)
    with open(f'{out}/{name}{"-v2" if v2 else ""}.binlog', 'wb') as f:
        f.write(b'\xfebin' + fde + body)

for name in names:
    write(name, writes[name])
    if any(typ(e) in (23, 24, 25) for g in writes[name] for e in g) and name in (
            'insert', 'update', 'delete', 'two-in-one', 'wide-update'):
        write(name, writes[name], v2=True)
print(f'capture-binlog-corpus: {len(names)} writes, checksums {"on" if checksum else "off"}, into {out}')
PY
ls -l "$OUT"
