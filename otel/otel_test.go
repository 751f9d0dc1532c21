package jobqueueotel_test

// The telemetry seen after a drain, on the three engines: spans recorded by
// tracetest.SpanRecorder and metrics read by a ManualReader equal what the
// table says afterwards.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/migrations"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// task is the job of the tests; Do says what its handler does.
type task struct {
	Do string `json:"do"`
}

func (task) Kind() string { return "task" }

// recorded is the telemetry of one test: its providers and what they saw.
type recorded struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider // what reader collects
	tel    *jobqueueotel.Telemetry
}

// newRecorded makes a Telemetry on an in-memory span recorder and a manual
// metric reader.
func newRecorded(t testing.TB) *recorded {
	t.Helper()
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	tel, err := jobqueueotel.New(jobqueueotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	r.tel, r.mp = tel, mp
	return r
}

// point is one data point of an instrument: its count (a counter's value,
// a histogram's number of measurements) under its attributes.
type point struct {
	attrs string
	count int64
}

// collect reads every instrument: name → attributes ("k=v,k=v") → count,
// failing the test on an unexpected unit or attribute.
func (r *recorded) collect(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	units := map[string]string{
		jobqueueotel.MetricEnqueued: "{job}", jobqueueotel.MetricWorked: "{attempt}",
		jobqueueotel.MetricDuration: "s", jobqueueotel.MetricWait: "s",
	}
	got := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != jobqueueotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, jobqueueotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			if want, ok := units[m.Name]; !ok || m.Unit != want {
				t.Errorf("instrument %q has unit %q; want one of the SPEC's with its unit (%q)", m.Name, m.Unit, want)
			}
			var pts []point
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					pts = append(pts, point{ownAttrs(t, m.Name, p.Attributes), p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts = append(pts, point{ownAttrs(t, m.Name, p.Attributes), int64(p.Count)})
					if v, ok := p.Min.Value(); ok && v < 0 {
						t.Errorf("%s{%s} has a negative measurement %v", m.Name, attrString(p.Attributes), v)
					}
				}
			default:
				t.Errorf("instrument %q is a %T", m.Name, m.Data)
			}
			for _, p := range pts {
				if strings.Contains(p.attrs, "id=") || strings.Contains(p.attrs, "kind=") {
					t.Errorf("%s has a high-cardinality attribute: %s", m.Name, p.attrs)
				}
				if got[m.Name] == nil {
					got[m.Name] = map[string]int64{}
				}
				got[m.Name][p.attrs] += p.count
			}
		}
	}
	return got
}

// ownAttrs is attrString of set without the messaging semantic
// conventions' attributes, after checking that set has them, right for
// instrument name: messaging.system jobqueue, messaging.destination.name
// the type, messaging.operation.name the instrument's operation.
func ownAttrs(t *testing.T, name string, set attribute.Set) string {
	t.Helper()
	op := map[string]string{
		jobqueueotel.MetricEnqueued: jobqueueotel.OperationEnqueue,
		jobqueueotel.MetricWorked:   jobqueueotel.OperationWork,
		jobqueueotel.MetricDuration: jobqueueotel.OperationWork,
		jobqueueotel.MetricWait:     jobqueueotel.OperationClaim,
	}[name]
	typ, _ := set.Value(jobqueueotel.AttrType)
	want := map[attribute.Key]string{
		"messaging.system":           jobqueueotel.MessagingSystem,
		"messaging.destination.name": typ.AsString(),
		"messaging.operation.name":   op,
	}
	for k, v := range want {
		if got, ok := set.Value(k); !ok || got.AsString() != v {
			t.Errorf("%s{%s}: %s = %q (present %v), want %q", name, attrString(set), k, got.AsString(), ok, v)
		}
	}
	own, _ := set.Filter(func(kv attribute.KeyValue) bool { _, theirs := want[kv.Key]; return !theirs })
	return attrString(own)
}

// attrString is a set of attributes as "k=v,k=v", sorted by key.
func attrString(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// openQueue installs a fresh table on e and opens a queue on it with opts.
func openQueue(t testing.TB, e *testdb.Env, opts ...queue.Option) (*queue.Queue, engine.Table) {
	t.Helper()
	name := e.Table(t)
	if err := migrations.Install(context.Background(), e.DB, name); err != nil {
		t.Fatal(err)
	}
	tbl, err := engine.ParseTable(e.Kind, name)
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(e.DB, append([]queue.Option{queue.WithTable(name), queue.WithLogger(testdb.QuietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue: %v", err)
		}
	})
	return q, tbl
}

// stealAttempt gives job id's row a claim token no attempt holds, so that
// the running attempt is fenced off (lost).
func stealAttempt(ctx context.Context, e *testdb.Env, tbl engine.Table, id int64) error {
	query := "UPDATE " + tbl.Quoted() + " SET claim_token = ? WHERE id = ?"
	if e.Kind == engine.Postgres {
		query = "UPDATE " + tbl.Quoted() + " SET claim_token = $1 WHERE id = $2"
	}
	_, err := e.DB.ExecContext(ctx, query, fmt.Sprintf("stolen-%d", id), id)
	return err
}

// TestTelemetryDrain drains successes (of two types), a retry, a permanent
// failure, an expiry, a cancel of a running job and a lost attempt, then
// checks that the spans and every counter and histogram equal what the
// table says: rows per status and type, error texts, attempts (the lost
// attempt, whose row its lease will bring to Reclaim, has its duration
// but is not counted in jobqueue.jobs.worked).
func TestTelemetryDrain(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		q, tbl := openQueue(t, e, rec.tel.QueueOptions()...)

		enqueueCalls := 0
		enqueue := func(args queue.JobArgs, opts ...queue.EnqueueOption) int64 {
			t.Helper()
			enqueueCalls++
			id, err := q.Enqueue(ctx, args, opts...)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		if n, err := q.EnqueueMany(ctx, []queue.JobArgs{task{"ok"}, task{"ok"}, task{"ok"}}, queue.Type("mail")); err != nil || n != 3 {
			t.Fatalf("EnqueueMany = %d, %v", n, err)
		}
		enqueueCalls++
		enqueue(task{"ok"}, queue.Type("sms"))
		enqueue(task{"ok"}, queue.Type("sms"), queue.UniqueKey("sms-1"))
		if _, err := q.Enqueue(ctx, task{"ok"}, queue.Type("sms"), queue.UniqueKey("sms-1")); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("duplicate enqueue: %v, want ErrDuplicate", err) // not counted: nothing written
		}
		enqueueCalls++
		ids := map[string]int64{
			"retry": enqueue(task{"retry"}, queue.Type("mail")),
			"fail":  enqueue(task{"fail"}, queue.Type("mail")),
			// Long enough for the worker, started below, to claim it
			// before it expires on a busy machine (a claim skips an
			// expired job, and the drain would wait for it forever).
			"expire": enqueue(task{"expire"}, queue.Type("mail"), queue.ExpiresIn(6*time.Second)),
			"cancel": enqueue(task{"cancel"}, queue.Type("mail")),
			"lose":   enqueue(task{"lose"}, queue.Type("mail")),
		}
		const attempts = 5 + 2 + 1 + 1 + 1 + 1 // the retry runs twice

		w := q.NewWorker(queue.WorkerConfig{Concurrency: 4, MaxJobs: attempts, Lease: 3 * time.Second, MaintenanceInterval: -1})
		queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error {
			switch job.Args.Do {
			case "retry":
				if job.Attempts == 1 {
					return queue.RetryAfter(0, errors.New("try again"))
				}
			case "fail":
				return queue.Permanent(errors.New("broken for good"))
			case "expire":
				// Run past the job's deadline, then fail: the attempt expires.
				select {
				case <-time.After(time.Until(*job.ExpiresAt) + 50*time.Millisecond):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				return errors.New("too slow")
			case "cancel":
				if err := q.Cancel(ctx, job.ID); err != nil {
					return err
				}
				<-ctx.Done() // the heartbeat (on PostgreSQL the NOTIFY) ends it
				return context.Cause(ctx)
			case "lose":
				if err := stealAttempt(ctx, e, tbl, job.ID); err != nil {
					return err
				}
			}
			return nil
		})
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}

		// What the table says.
		type key struct{ typ, outcome string }
		want := map[key]int64{}
		claims := map[string]int64{}
		enqueued := map[string]int64{}
		rows, err := q.List(ctx, queue.ListFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			enqueued[r.Type]++
			claims[r.Type] += int64(r.Attempts)
			outcome := map[queue.Status]queue.Outcome{
				queue.StatusCompleted:  queue.OutcomeCompleted,
				queue.StatusFailed:     queue.OutcomeFailed,
				queue.StatusExpired:    queue.OutcomeExpired,
				queue.StatusInProgress: queue.OutcomeLost, // fenced off by another token
			}[r.Status]
			if r.Status == queue.StatusFailed && r.Error == "cancelled" {
				outcome = queue.OutcomeCancelled
			}
			if outcome == "" {
				t.Fatalf("job %d is %s after the drain", r.ID, r.Status)
			}
			want[key{r.Type, string(outcome)}]++
			if r.Attempts > 1 {
				want[key{r.Type, string(queue.OutcomeRetried)}] += int64(r.Attempts - 1)
			}
		}
		// The drain did what the handlers meant (else the test proves little).
		for name, status := range map[string]queue.Status{"retry": queue.StatusCompleted, "fail": queue.StatusFailed,
			"expire": queue.StatusExpired, "cancel": queue.StatusFailed, "lose": queue.StatusInProgress} {
			if got, err := q.Get(ctx, ids[name]); err != nil || got.Status != status {
				t.Fatalf("job %q: %v, %v; want %s", name, got, err, status)
			}
		}
		if len(want) != 7 {
			t.Fatalf("the table shows %d (type, outcome) pairs, want 7 (every outcome, completed in two types): %v", len(want), want)
		}

		got := rec.collect(t)
		for k, n := range want {
			attrs := "outcome=" + k.outcome + ",type=" + k.typ
			// A lost attempt is not counted in worked: the Reclaim that
			// ends its row (in_progress, its lease to pass) counts it.
			if k.outcome == string(queue.OutcomeLost) {
				if g, ok := got[jobqueueotel.MetricWorked][attrs]; ok {
					t.Errorf("%s{%s} = %d, want none (Reclaim counts the attempt)", jobqueueotel.MetricWorked, attrs, g)
				}
			} else if g := got[jobqueueotel.MetricWorked][attrs]; g != n {
				t.Errorf("%s{%s} = %d, the table says %d", jobqueueotel.MetricWorked, attrs, g, n)
			}
			if g := got[jobqueueotel.MetricDuration][attrs]; g != n {
				t.Errorf("%s{%s} has %d measurements, the table says %d", jobqueueotel.MetricDuration, attrs, g, n)
			}
		}
		if len(got[jobqueueotel.MetricWorked]) != len(want)-1 {
			t.Errorf("%s has points %v, want exactly %v but lost", jobqueueotel.MetricWorked, got[jobqueueotel.MetricWorked], want)
		}
		for typ, n := range enqueued {
			if g := got[jobqueueotel.MetricEnqueued]["in_tx=false,type="+typ]; g != n {
				t.Errorf("%s{in_tx=false,type=%s} = %d, the table holds %d", jobqueueotel.MetricEnqueued, typ, g, n)
			}
		}
		for typ, n := range claims {
			if g := got[jobqueueotel.MetricWait]["type="+typ]; g != n {
				t.Errorf("%s{type=%s} has %d measurements, the table counts %d attempts", jobqueueotel.MetricWait, typ, g, n)
			}
		}

		// Spans: one jobqueue.work per attempt, an error for each handler
		// that failed; one jobqueue.enqueue per enqueue call.
		var work, enq, workErrors int
		perJob := map[int64][]int64{}
		for _, s := range rec.spans.Ended() {
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			switch s.Name() {
			case jobqueueotel.SpanWork:
				work++
				if s.SpanKind() != trace.SpanKindConsumer {
					t.Errorf("work span kind %v", s.SpanKind())
				}
				if attrs[jobqueueotel.AttrJobKind].AsString() != "task" || attrs[jobqueueotel.AttrJobType].AsString() == "" {
					t.Errorf("work span attributes %v", s.Attributes())
				}
				id := attrs[jobqueueotel.AttrJobID].AsInt64()
				perJob[id] = append(perJob[id], attrs[jobqueueotel.AttrJobAttempt].AsInt64())
				if s.Status().Code == codes.Error {
					workErrors++
					if len(s.Events()) == 0 || s.Events()[0].Name != "exception" {
						t.Errorf("failed work span of job %d has no recorded error", id)
					}
				}
			case jobqueueotel.SpanEnqueue:
				enq++
				if s.SpanKind() != trace.SpanKindProducer {
					t.Errorf("enqueue span kind %v", s.SpanKind())
				}
				if s.Status().Code == codes.Error {
					t.Errorf("enqueue span failed: %v", s.Status())
				}
			default:
				t.Errorf("unexpected span %q", s.Name())
			}
		}
		if work != attempts {
			t.Errorf("%d work spans, want one per attempt: %d", work, attempts)
		}
		if workErrors != 4 {
			t.Errorf("%d work spans with status Error, want 4 (retry's first, fail, expire, cancel)", workErrors)
		}
		if got := perJob[ids["retry"]]; !slices.Equal(sorted(got), []int64{1, 2}) {
			t.Errorf("retry job's work spans have attempts %v, want [1 2]", got)
		}
		if enq != enqueueCalls {
			t.Errorf("%d enqueue spans, want %d", enq, enqueueCalls)
		}
	})
}

func sorted(s []int64) []int64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestShutdownCutOffCancelledCounted: an attempt that the shutdown cut off,
// and whose job was cancelled before its release was written, is counted
// once, as cancelled (queue.Event's doc: every claimed attempt ends in
// exactly one event). The release dropped it without an event.
func TestShutdownCutOffCancelledCounted(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		q, _ := openQueue(t, e, rec.tel.QueueOptions()...)
		id, err := q.Enqueue(ctx, task{"x"}, queue.Type("mail"))
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		started := make(chan struct{})
		w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, ShutdownTimeout: -1, Lease: 30 * time.Second, MaintenanceInterval: -1})
		queue.Handle(w, func(hctx context.Context, job *queue.Job[task]) error {
			close(started)
			<-hctx.Done() // the shutdown cancels it
			if err := q.Cancel(context.Background(), job.ID); err != nil {
				return err
			}
			return context.Cause(hctx)
		})
		go func() { <-started; stop() }()
		if err := w.Run(runCtx); err != nil {
			t.Fatal(err)
		}
		row, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job after the run: status %s, error %q, attempts %d", row.Status, row.Error, row.Attempts)
		got := rec.collect(t)
		if n := got[jobqueueotel.MetricWorked]["outcome=cancelled,type=mail"]; n != 1 {
			t.Errorf("%s = %v; want outcome=cancelled,type=mail counted once (the job is %s %q)", jobqueueotel.MetricWorked, got[jobqueueotel.MetricWorked], row.Status, row.Error)
		}
	})
}

// TestGivenBackAttemptsNotCounted: a worker of concurrency 1 stops while
// its handler blocks and the jobs it claimed ahead wait in its buffer;
// those are given back unstarted, their attempts not counted in the table.
// jobqueue.jobs.worked and jobqueue.job.duration then equal the table's
// attempts (each run once, completed or released as retried), and
// jobqueue.job.wait has one measurement per claim. Before, each job given
// back was counted as a retried attempt with a handler of 0 s (PostgreSQL
// and MySQL: worked{retried} 100 where the table held 1 attempt not
// completed), so every restart of a busy worker raised the retries.
func TestGivenBackAttemptsNotCounted(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		var claims, givenBack atomic.Int64
		hear := queue.WithListener(func(ev queue.Event) {
			switch {
			case ev.Kind == queue.EventClaimed:
				claims.Add(1)
			case ev.Kind == queue.EventFailed && ev.GivenBack:
				givenBack.Add(1)
			}
		})
		q, _ := openQueue(t, e, append(rec.tel.QueueOptions(), hear)...)
		// Quick jobs first, so that the worker measures its handlers and
		// claims ahead, then one that blocks until the shutdown, then more.
		args := make([]queue.JobArgs, 200)
		for i := range args {
			args[i] = task{"ok"}
		}
		args[100] = task{"block"}
		if _, err := q.EnqueueMany(ctx, args, queue.Type("mail")); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		w := q.NewWorker(queue.WorkerConfig{Concurrency: 1, ShutdownTimeout: 50 * time.Millisecond, MaintenanceInterval: -1})
		queue.Handle(w, func(hctx context.Context, job *queue.Job[task]) error {
			if job.Args.Do == "block" {
				stop()
				<-hctx.Done() // the shutdown's timeout cuts it off
				return context.Cause(hctx)
			}
			return nil
		})
		if err := w.Run(runCtx); err != nil {
			t.Fatal(err)
		}
		// A claim ahead depends on the worker's measurements; SQLite's
		// claimer may take one job at a time.
		t.Logf("%d claims, %d given back unstarted", claims.Load(), givenBack.Load())

		rows, err := q.List(ctx, queue.ListFilter{Limit: queue.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		for _, r := range rows {
			switch {
			case r.Status == queue.StatusCompleted:
				want["outcome=completed,type=mail"]++
				want["outcome=retried,type=mail"] += int64(r.Attempts - 1)
			case r.Status == queue.StatusPending:
				want["outcome=retried,type=mail"] += int64(r.Attempts)
			default:
				t.Fatalf("job %d is %s after the run, want completed or pending", r.ID, r.Status)
			}
		}
		if want["outcome=retried,type=mail"] == 0 {
			delete(want, "outcome=retried,type=mail")
		}
		got := rec.collect(t)
		if !maps.Equal(got[jobqueueotel.MetricWorked], want) {
			t.Errorf("%s = %v, the table's attempts say %v", jobqueueotel.MetricWorked, got[jobqueueotel.MetricWorked], want)
		}
		if !maps.Equal(got[jobqueueotel.MetricDuration], want) {
			t.Errorf("%s has measurements %v, the table's attempts say %v", jobqueueotel.MetricDuration, got[jobqueueotel.MetricDuration], want)
		}
		if n := got[jobqueueotel.MetricWait]["type=mail"]; n != claims.Load() {
			t.Errorf("%s has %d measurements, want one per claim: %d", jobqueueotel.MetricWait, n, claims.Load())
		}
	})
}

// TestTelemetrySeveralTables: two tables instrumented on one MeterProvider,
// each queue with a Telemetry of its own whose Config.Attributes name its
// table ("a" and "b"), have their counts apart (3 jobs enqueued and worked in one, 1 in
// the other, all of type default), as their gauges are
// (TestGaugesSeveralQueues). Before, there was no such option: the two
// tables' counts added up to jobqueue.jobs.enqueued{type=default} 4.
// Attributes that would replace the instruments' own are refused, the
// gauges' status included (Config.Attributes are on the gauges' points
// too).
func TestTelemetrySeveralTables(t *testing.T) {
	for _, c := range []struct {
		attr attribute.KeyValue
		want string
	}{
		{attribute.String("type", "x"), `"type" is the instruments' own`},
		{attribute.String("outcome", "x"), `"outcome" is the instruments' own`},
		{attribute.Bool("in_tx", true), `"in_tx" is the instruments' own`},
		{attribute.String("status", "x"), `"status" is the instruments' own`},
		{attribute.String("messaging.destination.name", "x"), `"messaging.destination.name" is the instruments' own`},
		{attribute.String("", "x"), "not valid"},
	} {
		if _, err := jobqueueotel.New(jobqueueotel.Config{Attributes: []attribute.KeyValue{c.attr}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with attribute %v: %v, want an error saying %s", c.attr, err, c.want)
		}
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t) // its reader collects the provider both Telemetry share
		want := map[string]map[string]int64{}
		for table, n := range map[string]int{"a": 3, "b": 1} {
			tel, err := jobqueueotel.New(jobqueueotel.Config{MeterProvider: rec.mp,
				Attributes: []attribute.KeyValue{attribute.String("table", table)}})
			if err != nil {
				t.Fatal(err)
			}
			q, _ := openQueue(t, e, tel.QueueOptions()...)
			for range n {
				if _, err := q.Enqueue(ctx, task{"ok"}); err != nil {
					t.Fatal(err)
				}
			}
			w := q.NewWorker(queue.WorkerConfig{MaxJobs: n, MaintenanceInterval: -1})
			queue.Handle(w, func(context.Context, *queue.Job[task]) error { return nil })
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			for name, attrs := range map[string]string{
				jobqueueotel.MetricEnqueued: "in_tx=false,table=" + table + ",type=default",
				jobqueueotel.MetricWorked:   "outcome=completed,table=" + table + ",type=default",
				jobqueueotel.MetricDuration: "outcome=completed,table=" + table + ",type=default",
				jobqueueotel.MetricWait:     "table=" + table + ",type=default",
			} {
				if want[name] == nil {
					want[name] = map[string]int64{}
				}
				want[name][attrs] = int64(n)
			}
		}
		if diff := cmp.Diff(want, rec.collect(t)); diff != "" {
			t.Errorf("the instruments per table (-want +got):\n%s", diff)
		}
	})
}

// TestReclaimedAttemptsCounted: attempts whose worker died (its rows left
// in_progress with a lease run out, as a killed process leaves them) are
// counted in jobqueue.jobs.worked by the process whose Reclaim ends them,
// by type, as lost (SPEC 11's outcome for an attempt its worker did not
// end), whether Reclaim failed the job (its last attempt) or retried it.
// Before, EventReclaimed carried a count only and the listener skipped it,
// so no process ever counted those attempts.
func TestReclaimedAttemptsCounted(t *testing.T) {
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		rec := newRecorded(t)
		q, tbl := openQueue(t, e, rec.tel.QueueOptions()...)
		last := queue.Policy(queue.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		var ids []int64
		for _, c := range []struct {
			typ  string
			opts []queue.EnqueueOption
		}{{"mail", []queue.EnqueueOption{last}}, {"mail", nil}, {"sms", nil}} {
			id, err := q.Enqueue(ctx, task{"ok"}, append(c.opts, queue.Type(c.typ))...)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// As a worker killed during the attempts leaves them: claimed, the
		// lease (here the enqueue's time) run out.
		query := "UPDATE " + tbl.Quoted() + " SET status = 'in_progress', attempts = attempts + 1, claim_token = ?, lease_until = scheduled_at WHERE id = ?"
		if e.Kind == engine.Postgres {
			query = "UPDATE " + tbl.Quoted() + " SET status = 'in_progress', attempts = attempts + 1, claim_token = $1, lease_until = scheduled_at WHERE id = $2"
		}
		for _, id := range ids {
			if _, err := e.DB.ExecContext(ctx, query, fmt.Sprintf("crashed-%d", id), id); err != nil {
				t.Fatal(err)
			}
		}
		var n int64
		testwait.Until(t, 10*time.Second, 10*time.Millisecond, func() bool {
			var err error
			n, err = q.Reclaim(ctx) // once the lease is behind the clock (MySQL: whole seconds)
			if err != nil {
				t.Fatal(err)
			}
			return n > 0
		}, func() string { return "Reclaim ended no abandoned attempt" })
		if n != 3 {
			t.Fatalf("Reclaim ended %d attempts, want 3", n)
		}
		want := map[string]int64{"outcome=lost,type=mail": 2, "outcome=lost,type=sms": 1}
		got := rec.collect(t)
		if diff := cmp.Diff(want, got[jobqueueotel.MetricWorked]); diff != "" {
			t.Errorf("%s after Reclaim (-want +got):\n%s", jobqueueotel.MetricWorked, diff)
		}
	})
}

// nilPtrErr is an error whose Error method reads its receiver: a nil
// *nilPtrErr returned as an error panics there.
type nilPtrErr struct{ msg string }

func (e *nilPtrErr) Error() string { return e.msg }

// panicErr is an error whose Error method panics.
type panicErr struct{}

func (panicErr) Error() string { panic("boom") }

// TestWorkSpanErrorTextNeverPanics: a handler error whose Error method
// panics (a nil pointer returned as a non-nil error, Go's typed-nil
// pitfall, or a panicking method) fails the attempt with the text the
// queue makes of it, as without the telemetry, and the work span is an
// error with a text too. Before, the middleware called Error itself
// (SetStatus, RecordError), so it panicked there: the attempt failed with
// "handler panicked: runtime error: …" instead, logged with a stack, and
// the span's status was left Unset.
func TestWorkSpanErrorTextNeverPanics(t *testing.T) {
	var typedNil *nilPtrErr
	cases := []struct {
		name   string
		err    error
		stored string // the job's error column, as the queue writes it
	}{
		{"typed nil", typedNil, "failed: the handler returned a nil *jobqueueotel_test.nilPtrErr as its error"},
		{"panicking Error", panicErr{}, "%!v(PANIC=Error method: boom)"},
	}
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				rec := newRecorded(t)
				q, _ := openQueue(t, e, rec.tel.QueueOptions()...)
				id, err := q.Enqueue(ctx, task{"x"}, queue.Policy(queue.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second}))
				if err != nil {
					t.Fatal(err)
				}
				w := q.NewWorker(queue.WorkerConfig{MaxJobs: 1, MaintenanceInterval: -1})
				queue.Handle(w, func(context.Context, *queue.Job[task]) error { return c.err })
				if err := w.Run(ctx); err != nil {
					t.Fatal(err)
				}
				job, err := q.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if job.Status != queue.StatusFailed || job.Error != c.stored {
					t.Errorf("job is %s with error %q, want failed with %q", job.Status, job.Error, c.stored)
				}
				var work []sdktrace.ReadOnlySpan
				for _, s := range rec.spans.Ended() {
					if s.Name() == jobqueueotel.SpanWork {
						work = append(work, s)
					}
				}
				if len(work) != 1 {
					t.Fatalf("%d work spans, want 1", len(work))
				}
				if st := work[0].Status(); st.Code != codes.Error || st.Description == "" {
					t.Errorf("work span status %v %q, want Error with a text", st.Code, st.Description)
				}
				if ev := work[0].Events(); len(ev) != 1 || ev[0].Name != "exception" {
					t.Errorf("work span events %v, want one exception", ev)
				}
			})
		}
	})
}
