// Package stream serves the projection to browsers as Server-Sent Events:
// the Argo CD-compatible applications watch (GET
// /v1/deploy/stream/applications) and the resource-tree stream of one
// application, each filtered by the caller's auth.Scope. One Hub fans the
// projection's deltas out to every stream; handlers parse and authenticate,
// then call Hub.ServeApplications or Hub.ServeTree with the plain
// http.ResponseWriter and *http.Request.
//
// # Wire format
//
// Each change is "id: <revision>\ndata: {"result":{"type":…,"application":…}}\n\n".
// A stream starts with headers (text/event-stream, no-store,
// X-Accel-Buffering: no) and "retry: 3000" plus a comment, flushed before
// any event. A comment every Heartbeat keeps proxies open; it carries the
// newest revision as its id, so a client whose view was quiet still resumes
// from a recent position. An initial list (the ADDED burst) carries no ids
// but on its last event (or an empty frame "id: R"): a client cut off
// mid-burst keeps its old id and starts over. "event: reset" precedes a
// burst that replaces what a client holds, when its position cannot be
// resumed: from before this process (≤ Snapshot().Base), newer than any
// revision here (another process), or older than the ring.
//
// # Concurrency contract
//
//   - Goroutines. Run is the hub's only goroutine, started once by the
//     owner; it ends when its context ends, after it has ended every stream
//     and every Serve call has returned. Each Serve call runs on its HTTP
//     handler's goroutine and returns when the client goes away, the
//     credential expires (Request.Expiry, on the injected Clock), the hub
//     stops, or the stream is cut off. The package starts no other
//     goroutine but timer callbacks (context.AfterFunc, Clock.AfterFunc)
//     that only cancel.
//   - Publish is called by the projection's single writer after each Apply,
//     in revision order, after the snapshot holding the deltas was
//     published. It appends to an inbox and returns: it never blocks and
//     never encodes. Run takes the inbox, encodes each Application once
//     (the projection's shared encoding), appends a record to the resume
//     ring, and queues one frame per view that sees the change to that
//     view's subscribers. Deltas published within Batch of each other are
//     handed out in one round, so a busy subscriber is woken and flushed
//     once per round, not once per event.
//   - No gap, no duplicate. Revisions are one per Delta and contiguous; the
//     ring holds (floor, last]. A stream positions itself (an id, a
//     resourceVersion, or a snapshot's revision after a burst), replays the
//     ring after that position chunk by chunk, and joins its view under the
//     hub's lock when it has reached the ring's end: from then on Run queues
//     it every frame after that revision. This is "subscribe, then
//     snapshot" with the ring bridging the two. A revision missing from
//     what Publish receives cuts every subscriber off (they resume or
//     reset); none misses a change silently.
//   - Tenancy. Every event passes the Scope first (CD Applications only for
//     a scope that sees everything), then the name, projects, selector and
//     appNamespace filters. A change whose old version a view saw and whose
//     new version it does not is a DELETED carrying the old version (never
//     the new one, which may be another tenant's); the reverse is an ADDED.
//   - Fan-out cost. Subscribers are grouped by view (scope key, filter,
//     fields). A change is encoded once per view that sees it and the same
//     []byte frame is queued to each of its subscribers (Stats.Encodings).
//     Replays and bursts are encoded per subscriber (Stats.ReplayEncodings).
//   - Slow subscribers. Each has a queue of at most QueueSize frames. When
//     it is full, the subscriber is cut off: removed from its view, its
//     stream ended with a log line, and a write blocked on its connection
//     made to fail (a past write deadline). It reconnects and resumes with
//     Last-Event-ID. Run never waits on a client, so a stalled one delays no
//     one and holds at most QueueSize shared frames. A stream still
//     replaying the ring is in no view: Run cuts it off the same way once
//     it has fallen more than QueueSize revisions further behind the
//     ring's end than where its replay began (it reads slower than the
//     fleet changes and would replay forever).
//   - Tree streams are signalled, not queued: one pending signal at most.
//     The stream reads the snapshot itself and sends the latest tree when
//     its tree revision changed, so changes made while it writes coalesce
//     into one send. It ends when the app is deleted or leaves the scope.
//
// # Memory bounds
//
// The ring holds at most RingEvents records (default 100,000) and drops
// those older than RingAge (default 5 minutes): it covers at least one of
// the two. A record keeps the encoded Application after a change (shared
// with the projection while that version is current) and, for a deletion or
// a change of org or project, the one before; no App version or tree is
// kept. The inbox holds at most RingEvents deltas (past that, Run is a whole
// ring behind, and everyone is cut off as above). Per subscriber: at most
// QueueSize frame references, frames being shared by its view. Views exist
// only while they have subscribers. All of this is released as streams end:
// Stats reports subscribers, views and ring length.
//
// # Why the server side is ours, and r3labs/sse/v2 is the client
//
// github.com/r3labs/sse/v2 v2.10.0 (its last release, January 2023) was
// read and tried as the server. It fails the contract above:
//
//   - stream.go:77-79 fans out by sending each event to every subscriber's
//     channel (64 slots, stream.go:112) while blocking: one client that
//     stops reading stops delivery to all others after 64 events, and then
//     Server.Publish (server.go:121) blocks its caller, which here is the
//     projection's writer. TestR3labsFanOutBlocksOnOneStalledClient shows
//     it: the healthy subscriber received 65 of 200 events and Publish
//     blocked after 67.
//   - AutoReplay is on by default (server.go:46) and the event log only
//     grows (event_log.go:23): unbounded memory. The log overwrites each
//     event's id with its index (event_log.go:21; TestR3labsEventLogRenumbers),
//     so ids cannot be revisions, restart at 0 in each process, and cannot
//     express "resourceVersion = N"; a replay also resends the event the
//     client already has (id >= Last-Event-ID, event_log.go:35), and runs in
//     the stream goroutine, blocking everyone while it lasts (stream.go:58).
//   - There is no heartbeat, write errors are ignored (http.go:88-118
//     discard Fprintf's errors and Flush cannot fail), and there is no
//     per-subscriber filter: tenancy would need one stream per view, each
//     with its own renumbered log, and no way to turn a scope move into
//     DELETED for one view and ADDED for another.
//
// Configuring it differently (TryPublish drops events silently; a stream per
// client gives up shared encoding) cannot meet "never blocks, never drops
// silently". So the framing, queues and ring are here, in a few hundred
// lines, and the r3labs client is used as the independent reader in this
// package's tests and by `deployd watch`. Two client behaviours matter
// there: SubscribeWithContext returns nil without reconnecting when the
// server ends a stream cleanly (client.go:216-217), and it has no read
// timeout; the watch command loops and keeps an idle watchdog for both.
package stream
