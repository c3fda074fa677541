// Package stream serves the projection to browsers as Server-Sent Events:
// the Argo CD-compatible applications watch (GET
// /v1/deploy/stream/applications) and the resource-tree stream of one
// application, each filtered by the caller's auth.Scope. One Hub fans the
// projection's deltas out to every stream; handlers parse and authenticate,
// then call Hub.ServeApplications or Hub.ServeTree with the plain
// http.ResponseWriter and *http.Request. Two rules the list routes share
// with the streams live here too: Visible, the one visibility predicate,
// and FieldsSyntax, the one parser of Argo CD's fields parameter.
//
// # Files
//
//   - hub.go: Hub, Options, Publish, Run, Synced, Stats; the inbox and the
//     rounds of fan-out.
//   - ring.go: the resume ring of records and its floor.
//   - view.go, subscriber.go: views (a scope and a filter, each event
//     encoded once per view) and their subscribers, each with its bounded
//     queue of shared frames.
//   - serve.go, tree.go: ServeApplications and ServeTree.
//   - history.go: History and PastRows, the catch-up from the cluster.
//   - writer.go: one client's frames (headers, flush, abort), the errors a
//     Serve returns before it writes, the reasons a stream ends.
//   - filter.go, parse.go, fields.go: Request, AppFilter and Visible;
//     Last-Event-ID and resourceVersion; Fields and FieldsSyntax.
//   - drain.go: Drain, which ends every stream, spread over a window, at
//     shutdown.
//   - clock.go: the injected Clock (streamtest has a fake one).
//
// # Wire format
//
// Each change is "data: {"result":{"type":…,"application":…}}\n\n"; the
// last event of a batch (and the last of an initial list, or an empty
// frame when the list is empty) carries the batch's position as its id
// ("id: <position>"). A stream starts with headers (text/event-stream,
// no-store, X-Accel-Buffering: no) and "retry: 3000" plus a comment,
// flushed before any event. A comment every Heartbeat keeps proxies open;
// it carries the newest position fanned out as its id, so a client whose
// view was quiet still resumes from a recent position. "event: reset"
// precedes a burst that replaces what a client holds, when its position
// cannot be resumed (below).
//
// # Positions: one stream across replicas
//
// Several replicas, each with its own watch of one cluster, behind one
// Service, are one stream to a client: it may reconnect to any of them.
// So a position is the cluster's own order, never a process counter: the
// newest resourceVersion folded (projection.Snapshot.Position; the API
// server orders every write of a cluster by it, and apimachinery's
// comparator reads it as a number). Every replica folding the same
// watches reaches the same positions, and a list's
// metadata.resourceVersion is its snapshot's position, so "list, then
// watch from its resourceVersion" works across replicas too. With one
// cluster an id is one decimal number. Why positions are not a process
// counter: docs/decisions/0002-positions-are-the-clusters-resource-versions.md.
//
// With several clusters a position is one resourceVersion per cluster
// (projection.Position, written "<cluster>=<rv>,…"); the comparisons
// below are part by part ("at or below M": every part at or below M's).
// Replicas fold the clusters' changes interleaved in different orders, so
// a record is seen at M when M's part of the record's own cluster is at
// or past the record's; after replaying, the client's id moves past the
// records skipped as seen (docs/decisions/0012).
//
// Past projection.CompactOver bytes (about 30 clusters) an id is written
// compact, "@" and a digest of the position, which the replica keeps in
// its projection.Book (Options.Positions); a stream resuming from one this
// replica does not hold asks its peers for it (the answer is checked
// against the digest), and one no replica holds is reset. A drain's last
// frame carries the id written whole, so a client leaving a replica that
// shuts down resumes anywhere (docs/decisions/0014).
//
// The deltas of one fold share its position: a batch. Only the last event
// of a batch a view sees carries the id, so a client cut off within a
// batch resumes before it (and gets the batch's events again, the same
// versions), never after events it did not get. The hub adds a batch's
// records to the ring under one hold of its lock, so a stream catching up
// never sees half of one.
//
// A stream resuming from position M (Last-Event-ID, else resourceVersion):
//
//  1. If this replica has not folded M yet (M is newer than its snapshot),
//     it waits, up to ResumeWait (5 s): replicas are normally milliseconds
//     apart. A cluster this replica holds nothing of (it has not answered
//     since the replica started) is not waited for: the client keeps what
//     it holds of it, and every id it is given keeps M's part of it.
//  2. If the ring covers M — the replica has synced, and M is at or above
//     the ring's floor position — the changes after M are replayed from
//     the ring (records of positions after M) and the stream goes live. A
//     record seen at M is never sent: the client has it.
//  3. Otherwise — M is older than this replica (it started after M), or
//     than its ring, or the wait ran out — the replica proves what
//     changed since M from the API server's history (History): the row
//     objects (Apps, CD Applications, Middlewares, which name the static
//     sites) as they were at exactly M, read from etcd, made rows as the
//     fold makes them (projection.Store.PastRows). Rows the view sees now
//     and did not see then are ADDED; rows seen both then and now whose
//     tree holds an object newer than M, or lost one after M
//     (projection.App.Removed), are MODIFIED (their current version); rows
//     seen then and not now (deleted, or moved out of the caller's scope)
//     are DELETED with what they were. A cluster this replica holds
//     nothing of is not asked of the history. The last event carries the
//     snapshot's position (with M's part of such a cluster); the stream
//     goes on from the ring after it. One
//     History answer serves every stream resuming from one position (a
//     replica that has just started takes many at once), and the last few
//     are kept.
//  4. When that cannot be proven — no History (the demo), not synced
//     within ResumeWait, etcd compacted past M, the API server failing —
//     "event: reset", then the full burst.
//
// The ring's floor position is set when the replica has synced
// (Hub.Synced): the fold's position then, in each cluster the newest
// resourceVersion of an object folded (0 for a cluster that did not
// answer), as every snapshot, record and client position is written.
// Every change after it is in the ring; one at or before it that the ring
// lacks is one a client at or past the floor already has. As records
// leave the ring, the floor moves up to theirs.
//
// With several clusters a record is seen by a client whose position
// covers the record's own cluster's part, whatever the others: replicas
// fold the clusters' changes interleaved in different orders. So an id
// given to a resumed client is never behind its position in any part (it
// holds everything its position covers, and every record up to the one
// the id comes with), and a record the hub fans out after the client
// joined that its position's part of the record's cluster covers (a change
// it saw on another replica, folded here after the client's resume began)
// is not sent again.
//
// What a position cannot tell: each watch delivers its resource in order,
// but two watches (Deployments, Pods) may deliver with a few milliseconds
// between them, so a change can be folded after a newer change of another
// resource. A client given the newer position by one replica in that
// window, and resumed by another that folded both, misses the older
// change until its row changes again. (A cluster that first answers
// after the replica is ready has its initial lists folded at once,
// cluster.Watcher.HoldLate, so its rows never go out before their
// trees.) History's MODIFIED also relies,
// for an object removed from a row's tree before this replica started, on
// the row holding another object newer than M (the owner's status, as the
// controllers write it when they remove a child).
//
// # A cluster's condition
//
// While a replica sees a cluster's API server fail, every row of that
// cluster carries a condition naming it and since when. That is the
// replica's own observation, made at its own moment, and moves no
// resourceVersion, so the position marks it: the part of a cluster the
// replica sees failing is written "<cluster>=<rv>~<since>"
// (projection.Position.Down). A client's position says which condition
// it holds its rows of each cluster with. The change of a condition is a
// batch of every row of the cluster (a record with cond set); it is seen
// by a client whose part of the cluster is newer, or the same and marked
// alike, and sent to any other. A client that marks a cluster otherwise
// than this replica does (it was told by a replica that saw the cluster
// at another moment) is replayed from the hub's last change of that
// condition, when the ring holds it, and otherwise caught up as from
// history, where the rows of that cluster are sent again: it ends with
// the condition this replica sees, and holds no stale one. The ids a
// client is given mark each cluster as the client holds it. With one
// cluster an id stays one decimal and carries no mark.
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
//     view's subscribers. Before the first sync, with no stream open, it
//     encodes nothing: no one can read those records (the ring is emptied
//     at sync, and a stream opened later starts from a snapshot that holds
//     them), so the initial lists' rows are encoded on first read. Deltas
//     published within Batch of each other are handed out in one round,
//     so a busy subscriber is woken and flushed once per round, not once
//     per event.
//   - No gap, no duplicate. Inside the hub, records are ordered by this
//     process's revisions, one per Delta and contiguous; the ring holds
//     (floor, last]. A stream positions itself (a position mapped to the
//     revision after which the ring holds what followed it, or a
//     snapshot's revision after a burst), replays the ring after that
//     revision chunk by chunk, and joins its view under the hub's lock
//     when it has reached the ring's end: from then on Run queues it every
//     frame after that revision (and after the position it resumed from).
//     This is "subscribe, then snapshot" with the ring bridging the two.
//     A revision missing from what Publish receives cuts every subscriber
//     off (they resume or reset); none misses a change silently.
//   - Tenancy. Every event passes the Scope first (CD Applications only for
//     a scope that sees everything), then the name, projects, selector and
//     appNamespace filters. A change whose old version a view saw and whose
//     new version it does not is a DELETED carrying the old version (never
//     the new one, which may be another tenant's); the reverse is an ADDED.
//   - Fan-out cost. Subscribers are grouped by view (scope key, filter,
//     fields). A change is encoded once per view that sees it and the same
//     []byte frame is queued to each of its subscribers (Stats.Encodings).
//     Replays and bursts are sent per subscriber (Stats.ReplayEncodings
//     counts their events); a burst without fields writes each row's
//     shared encoding between a frame's head and tail, building no frame.
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
// # The SSE library
//
// The framing, queues and ring are this package's own
// (docs/decisions/0001-sse-server-is-ours-r3labs-is-the-client.md says
// why). The client of github.com/r3labs/sse/v2 is the independent reader
// of this package's tests and of `deployd watch`.
package stream
