// Package testenv is the harness of walwatch's Go integration tests: real
// databases, a real walwatch binary, and a writer that writes what
// Clusterpedia's collector writes. Nothing here is a mock.
//
// What a test gets:
//
//   - a database of its own, with Clusterpedia's `resources` table, on the
//     shared PostgreSQL or MariaDB server (NewPostgres, NewMariaDB), or on a
//     private server it may restart and kill (NewPrivatePostgres,
//     NewPrivateMariaDB);
//   - walwatch on that database (StartWalwatch), restartable, with a
//     client on its socket;
//   - a Clusterpedia-shaped writer (NewWriter) and the table's rows
//     (SelectRows), to compare what a watch delivered with SQL;
//   - a TCP proxy (NewProxy) to stall or cut walwatch's database
//     connections.
//
// The servers come from the environment `make test` sets up
// (tests/tools/run-tests.sh and ctest):
//
//	WALWATCH_TEST_PGHOST, WALWATCH_TEST_PGPORT  the shared PostgreSQL 15 with
//	                                            wal2json (socket directory, port)
//	WALWATCH_TEST_MYDIR                         the shared MariaDB sandbox's directory
//	WALWATCH_BINARY                             walwatch (default <source>/build/walwatch)
//	WALWATCH_SOURCE_DIR                         the repository (default: found upwards
//	                                            from the working directory)
//	WALWATCH_TEST_KEEP_LOGS=1                   keep the test databases on the
//	                                            shared servers (and their slots)
//
// A test whose server or binary is missing fails, naming `make test`: it
// never skips, so that a misconfigured run cannot pass by testing nothing.
//
// A private server's log, and walwatch's stderr, are logged (their tails)
// when the test failed.
//
// Every function that takes a testing.TB calls its Fatal methods, so it
// must be called from the test's own goroutine, and registers what it
// starts with t.Cleanup. Tests may run in parallel: names, slots, server
// ids and sockets are unique per test, and walwatch serves no metrics port.
package testenv
