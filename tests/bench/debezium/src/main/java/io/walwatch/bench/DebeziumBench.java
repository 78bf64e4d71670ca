package io.walwatch.bench;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.engine.format.Json;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * The Debezium side of tests/bench/debezium_bench.sh: Debezium's embedded engine with its PostgreSQL
 * connector (plugin.name=pgoutput, snapshot.mode=no_data) on an existing slot and publication,
 * feeding one consumer that counts the change events of {@code public.resources} and stops at the
 * Nth.
 *
 * <pre>
 *   java -cp 'target/classes:target/lib/*' io.walwatch.bench.DebeziumBench
 *       --host H --port P [--user postgres] [--dbname postgres]
 *       --slot S --publication PUB --count N
 *       [--format connect|json] [--latency] [--warmup W] [--timeout SECONDS] [--hold]
 *       [--offset-file F] [--prop key=value]... [--out FILE]
 * </pre>
 *
 * <ul>
 *   <li>--format connect (default): the consumer gets Kafka Connect {@code SourceRecord}s, the
 *       connector's own objects, nothing serialized; json: each event serialized by the engine's
 *       JsonConverter into the JSON text Debezium Server and Kafka consumers get (what a watcher
 *       of walwatch gets is serialized too).
 *   <li>--latency: read bench_writer's stamp "W:SEQ:NS" (metadata.annotations
 *       ["bench.walwatch.io/stamp"] inside the row's {@code object} column) and take
 *       receive-time - NS per event, as fanout_client does for walwatch's watchers; --warmup W:
 *       the first W events are reported apart (the JVM's warm-up).
 *   <li>--hold: once N events arrived and the figures are out, keep streaming (and the
 *       walsender) until SIGTERM, so that the caller can read CPU figures first.
 *   <li>--offset-file F: offsets in a file (FileOffsetBackingStore); default in memory.
 *   <li>--prop key=value: any other Debezium or engine property (e.g. poll.interval.ms=1).
 * </ul>
 *
 * <p>Prints key=value lines (also to --out, written whole once N events arrived): events,
 * first_event_ns, half_event_ns, last_event_ns, warmup_event_ns (CLOCK_REALTIME at the first,
 * N/2-th, last and W-th event), cpu_first_ns, cpu_half_ns, cpu_last_ns, cpu_warmup_ns (this
 * process's CPU time, all threads, at those events), gc_count, gc_ms, jit_ms, and with
 * --latency: samples and latency_{all,warmup,steady}_{p50,p99,max}_us (warmup: the first W
 * events; steady: the rest).
 * Exit status 0 once N events arrived (with --hold: 143 at the SIGTERM after them); 1 on the
 * timeout or an engine error; 2 on a usage error.
 *
 * <p>Threads: the engine calls the consumer from its own threads; the counters are guarded by
 * this object's monitor (uncontended: one batch at a time); main waits on {@code done}.
 */
public final class DebeziumBench {
  private static final String STAMP_KEY = "bench.walwatch.io/stamp";
  private static final String TABLE_TOPIC_SUFFIX = ".public.resources";

  private final Options options;
  private final long[] latencyUs;
  private final CountDownLatch done = new CountDownLatch(1);
  private final com.sun.management.OperatingSystemMXBean os =
      (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

  private long events;
  private long samples;
  private long firstNs;
  private long halfNs;
  private long warmNs;
  private long lastNs;
  private long cpuFirstNs;
  private long cpuHalfNs;
  private long cpuWarmNs;
  private long cpuLastNs;
  private volatile Throwable engineError;

  private DebeziumBench(Options options) {
    this.options = options;
    this.latencyUs = options.latency ? new long[(int) options.count] : new long[0];
  }

  public static void main(String[] args) throws Exception {
    Options options = Options.parse(args);
    System.exit(new DebeziumBench(options).run());
  }

  private int run() throws Exception {
    Properties props = engineProperties();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    DebeziumEngine<?> engine;
    if (options.format.equals("json")) {
      engine =
          DebeziumEngine.create(Json.class)
              .using(props)
              .using(this::onCompletion)
              .notifying(
                  (List<ChangeEvent<String, String>> batch,
                      DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                    long now = nowNs();
                    for (ChangeEvent<String, String> e : batch) {
                      if (e.destination() != null
                          && e.destination().endsWith(TABLE_TOPIC_SUFFIX)
                          && e.value() != null) {
                        count(now, e.value());
                      }
                      committer.markProcessed(e);
                    }
                    committer.markBatchFinished();
                  })
              .build();
    } else {
      engine =
          DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
              .using(props)
              .using(this::onCompletion)
              .notifying(
                  (List<RecordChangeEvent<SourceRecord>> batch,
                      DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer) -> {
                    long now = nowNs();
                    for (RecordChangeEvent<SourceRecord> e : batch) {
                      SourceRecord r = e.record();
                      if (r.topic().endsWith(TABLE_TOPIC_SUFFIX) && r.value() instanceof Struct) {
                        count(now, options.latency ? objectOf((Struct) r.value()) : null);
                      }
                      committer.markProcessed(e);
                    }
                    committer.markBatchFinished();
                  })
              .build();
    }
    executor.execute(engine);
    boolean complete = done.await(options.timeoutSeconds, TimeUnit.SECONDS);
    int rc = 0;
    if (engineError != null) {
      System.err.println("debezium_bench: the engine failed: " + engineError);
      rc = 1;
    } else if (!complete) {
      System.err.printf(
          "debezium_bench: %d of %d events after %d s%n",
          events, options.count, options.timeoutSeconds);
      rc = 1;
    }
    report();
    if (rc == 0 && options.hold) {
      // Streaming stays open (the walsender too) until SIGTERM, so that the
      // benchmark can read their CPU first; the JVM then exits with 143.
      Runtime.getRuntime().addShutdownHook(new Thread(() -> close(engine)));
      Thread.sleep(Long.MAX_VALUE);
    }
    close(engine);
    executor.shutdownNow();
    return rc;
  }

  // Stops the task and the replication connection; not timed, and bounded:
  // the benchmark has its figures.
  private static void close(DebeziumEngine<?> engine) {
    Thread closer =
        new Thread(
            () -> {
              try {
                engine.close();
              } catch (IOException | RuntimeException ignored) {
                // Exiting anyway.
              }
            });
    closer.setDaemon(true);
    closer.start();
    try {
      closer.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private Properties engineProperties() throws IOException {
    Properties p = new Properties();
    p.setProperty("name", "walwatch-bench");
    p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
    p.setProperty("plugin.name", "pgoutput");
    p.setProperty("database.hostname", options.host);
    p.setProperty("database.port", options.port);
    p.setProperty("database.user", options.user);
    p.setProperty("database.password", options.password);
    p.setProperty("database.dbname", options.dbname);
    p.setProperty("topic.prefix", "bench");
    p.setProperty("table.include.list", "public.resources");
    // The slot and the publication exist before the load, as walwatch's do;
    // stream from the slot's start, no snapshot (what `never` was before 3.0).
    p.setProperty("slot.name", options.slot);
    p.setProperty("publication.name", options.publication);
    p.setProperty("publication.autocreate.mode", "disabled");
    p.setProperty("snapshot.mode", "no_data");
    if (options.offsetFile.isEmpty()) {
      p.setProperty(
          "offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
    } else {
      p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
      p.setProperty("offset.storage.file.filename", options.offsetFile);
    }
    p.setProperty("offset.flush.interval.ms", "10000");
    if (options.format.equals("json")) {
      // Debezium Server's and Kafka's default: each event with its schema.
      p.setProperty("converter.schemas.enable", "true");
    }
    for (String kv : options.props) {
      int eq = kv.indexOf('=');
      p.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
    }
    return p;
  }

  private void onCompletion(boolean success, String message, Throwable error) {
    if (!success || error != null) {
      engineError = error != null ? error : new RuntimeException(message);
      done.countDown();
    }
  }

  /** The row's {@code object} column (jsonb arrives as its text) of an insert or an update. */
  private static String objectOf(Struct envelope) {
    Struct after = envelope.getStruct("after");
    return after == null ? null : after.getString("object");
  }

  // One change event of the table, received at `now`; `text` holds the stamp
  // when --latency (the object, or the whole JSON event).
  private synchronized void count(long now, String text) {
    if (events >= options.count) return;
    long n = ++events;
    if (n == 1) {
      firstNs = now;
      cpuFirstNs = os.getProcessCpuTime();
    }
    if (n == (options.count + 1) / 2) {
      halfNs = now;
      cpuHalfNs = os.getProcessCpuTime();
    }
    if (n == options.warmup) {
      warmNs = now;
      cpuWarmNs = os.getProcessCpuTime();
    }
    if (options.latency && text != null) {
      long stampNs = stampNs(text);
      if (stampNs > 0) latencyUs[(int) samples++] = Math.max(0, (now - stampNs) / 1000);
    }
    if (n == options.count) {
      lastNs = now;
      cpuLastNs = os.getProcessCpuTime();
      done.countDown();
    }
  }

  /**
   * NS of bench_writer's stamp "W:SEQ:NS" in {@code text}, or 0 (none, or a setup row's 0:0:0).
   * In a JSON event the object is an escaped string: skip to the first digit after the key.
   */
  static long stampNs(String text) {
    int at = text.indexOf(STAMP_KEY);
    if (at < 0) return 0;
    int i = at + STAMP_KEY.length();
    int end = text.length();
    while (i < end && !Character.isDigit(text.charAt(i))) i++;
    int colons = 0;
    while (i < end && colons < 2) {
      char c = text.charAt(i++);
      if (c == ':') colons++;
      else if (!Character.isDigit(c)) return 0;
    }
    long ns = 0;
    while (i < end && Character.isDigit(text.charAt(i))) ns = ns * 10 + (text.charAt(i++) - '0');
    return ns;
  }

  private static long nowNs() {
    java.time.Instant t = java.time.Instant.now();
    return t.getEpochSecond() * 1_000_000_000L + t.getNano();
  }

  private synchronized void report() throws IOException {
    List<String> lines = new ArrayList<>();
    lines.add("events=" + events);
    lines.add("first_event_ns=" + firstNs);
    lines.add("half_event_ns=" + halfNs);
    lines.add("last_event_ns=" + lastNs);
    lines.add("cpu_first_ns=" + cpuFirstNs);
    lines.add("cpu_half_ns=" + cpuHalfNs);
    lines.add("cpu_last_ns=" + cpuLastNs);
    lines.add("warmup_event_ns=" + warmNs);
    lines.add("cpu_warmup_ns=" + cpuWarmNs);
    long gcCount = 0;
    long gcMs = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      gcCount += Math.max(0, gc.getCollectionCount());
      gcMs += Math.max(0, gc.getCollectionTime());
    }
    lines.add("gc_count=" + gcCount);
    lines.add("gc_ms=" + gcMs);
    lines.add("jit_ms=" + ManagementFactory.getCompilationMXBean().getTotalCompilationTime());
    if (options.latency) {
      int n = (int) samples;
      int w = (int) Math.min(options.warmup, n);
      lines.add("samples=" + n);
      percentiles(lines, "all", 0, n);
      percentiles(lines, "warmup", 0, w);
      percentiles(lines, "steady", w, n);
    }
    String text = String.join("\n", lines) + "\n";
    System.out.print(text);
    System.out.flush();
    if (!options.out.isEmpty()) {
      // Whole or not at all: the benchmark reads it as soon as it appears.
      Path out = Path.of(options.out);
      Path tmp = Path.of(options.out + ".tmp");
      Files.write(tmp, text.getBytes(StandardCharsets.UTF_8));
      Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
  }

  // Nearest-rank percentiles of latencyUs[from, to).
  private void percentiles(List<String> lines, String name, int from, int to) {
    long[] v = java.util.Arrays.copyOfRange(latencyUs, from, to);
    java.util.Arrays.sort(v);
    lines.add("latency_" + name + "_p50_us=" + rank(v, 0.50));
    lines.add("latency_" + name + "_p99_us=" + rank(v, 0.99));
    lines.add("latency_" + name + "_max_us=" + (v.length == 0 ? 0 : v[v.length - 1]));
  }

  private static long rank(long[] sorted, double q) {
    if (sorted.length == 0) return 0;
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
  }

  /** The command line; a usage error exits with status 2. */
  static final class Options {
    String host = "127.0.0.1";
    String port = "5432";
    String user = "postgres";
    String password = "";
    String dbname = "postgres";
    String slot = "";
    String publication = "";
    String format = "connect";
    long count;
    boolean latency;
    boolean hold;
    long warmup;
    long timeoutSeconds = 600;
    String offsetFile = "";
    String out = "";
    final List<String> props = new ArrayList<>();

    static Options parse(String[] args) {
      Options o = new Options();
      try {
        for (int i = 0; i < args.length; i++) {
          String a = args[i];
          if (a.equals("--latency") || a.equals("--hold")) {
            o.latency |= a.equals("--latency");
            o.hold |= a.equals("--hold");
            continue;
          }
          if (i + 1 >= args.length) usage(a + " needs a value");
          String v = args[++i];
          switch (a) {
            case "--host" -> o.host = v;
            case "--port" -> o.port = v;
            case "--user" -> o.user = v;
            case "--password" -> o.password = v;
            case "--dbname" -> o.dbname = v;
            case "--slot" -> o.slot = v;
            case "--publication" -> o.publication = v;
            case "--format" -> o.format = v;
            case "--count" -> o.count = Long.parseLong(v);
            case "--warmup" -> o.warmup = Long.parseLong(v);
            case "--timeout" -> o.timeoutSeconds = Long.parseLong(v);
            case "--offset-file" -> o.offsetFile = v;
            case "--out" -> o.out = v;
            case "--prop" -> {
              if (v.indexOf('=') <= 0) usage("--prop: key=value");
              o.props.add(v);
            }
            default -> usage("unknown flag " + a);
          }
        }
      } catch (NumberFormatException e) {
        usage("not a number: " + e.getMessage());
      }
      if (o.slot.isEmpty() || o.publication.isEmpty()) usage("--slot and --publication are required");
      if (o.count <= 0 || o.count > Integer.MAX_VALUE) usage("--count: 1 to 2^31-1");
      if (!o.format.equals("connect") && !o.format.equals("json")) usage("--format: connect or json");
      return o;
    }

    private static void usage(String why) {
      PrintStream err = System.err;
      err.println("debezium_bench: " + why);
      err.println(
          "usage: DebeziumBench --host H --port P [--user U] [--dbname D] --slot S"
              + " --publication PUB --count N [--format connect|json] [--latency]"
              + " [--warmup W] [--timeout S] [--hold] [--offset-file F] [--prop k=v]..."
              + " [--out FILE]");
      System.exit(2);
    }
  }
}
