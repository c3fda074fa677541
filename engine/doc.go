// Package engine drives the cluster to what a git repository declares:
// source → render → policy → apply → prune → report.
//
// Each stage is a plain function or a small type with one job, in its own
// file: Source fetches one ref of one repository (go-git, shallow, into a
// cache folder; the revision is the commit SHA) and keeps the last good
// revision when a fetch fails; Render turns the files under the path (or
// the kustomization there) into objects, with errors that name the file and
// line; Policy.Admit applies the policy (allow-listed kinds, mapped
// namespaces, the tenant org label) before any request is made, so a refused
// object never reaches the API server, not even as a dry run; apply sends the
// objects whose desired state differs from what is live; prune deletes
// labelled objects whose namespace and name no rendered document holds,
// behind the fuse. A refused object (even of a misspelt kind or
// apiVersion), and a live one outside the namespace map, is never pruned.
//
// Source fetches with go-git, never the git binary; credentials (an HTTPS
// token as the Basic-auth password, or an SSH key) go only to https, ssh or
// a loopback http URL (auth.IsLoopbackHost), and a fetch error's text has
// them removed. The package enginetest serves real repositories (git
// http-backend) to tests, with receive-pack enabled so that a write-back's
// pushes can be tested against the same server.
//
// # Files
//
//   - config.go: Config, Defaults, Validate, LeaseName; FieldManager and
//     AnnotationDesiredHash.
//   - engine.go: Engine, New, NewForClients; Reconcile (joining runs),
//     Trigger, Run (the loop), Status, Suspend, Resume, Desired.
//   - run.go: one run, runOnce and pipeline: fetch, render, admit, list
//     live, plan, send, prune, report.
//   - source.go: Source, the fetch of one ref and the files of a commit.
//   - render.go, kustomize.go: Render and RenderError; the kustomize build
//     and the checks before it.
//   - policy.go: Policy.Admit.
//   - apply.go: the live list, the plan and the server-side applies.
//   - prune.go: prune and its fuse.
//   - lead.go, state.go: LeaseConfig, the terms of leadership, Leader; the
//     state ConfigMap every replica watches.
//   - writeback.go, tagedit.go, history.go: WriteTag and WriteError;
//     EditTag; History.
//
// # Render
//
// Render runs under the run's context: plain files are rendered one by one,
// checking the context between files; a kustomize build (krusty, in
// process) still running when the context ends leaves the render at once
// with a RenderError saying it ran past the run's deadline, and finishes in
// the background (one build runs at a time). The build reads an in-memory
// copy of the commit's regular files, so a symlink is never followed
// (Files leaves it out); plugins (exec, container, Go) are off and loads are
// restricted to each kustomization's root. Before the build, every
// kustomization in the tree is checked: a string in any field that is a URL
// or a remote git reference (a resource, base or component; a patch,
// replacement, configuration, CRD, OpenAPI or generator file path) fails the
// render with an error naming the kustomization and the field
// (patches[0].path), and so does Helm in any form (helmCharts, helmGlobals,
// helmChartInflationGenerator, a HelmChartInflationGenerator configuration).
// A generator, transformer or validator must be inline or a file of the
// repository (not a folder), and its configuration is checked the same way.
// Values kustomize only copies into objects (metadata, annotations, labels,
// literals, inline patches) may hold URLs. This check is what keeps a build
// off the network (docs/decisions/0006-engine-renders-in-process-offline.md).
//
// # Apply
//
// Server-side apply through client-go's dynamic client (Apply with field
// manager "deployd" and Force, so a self-heal takes back a field another
// manager changed). A run lists the live objects of the allowed kinds that
// carry a tracking label once (one request per kind), and an object is sent
// only when its desired state changed (the desired-hash annotation, a hash
// of the rendered object) or when live has drifted from it (self-heal:
// drift.Drifted of package projection/drift, the meaning of drift the diff
// routes show too). An unchanged object is not sent, so its resourceVersion
// does not move. An object labelled for another instance is SyncFailed and
// never sent; an unlabelled one is adopted. A live object carrying
// projection.AnnotationReconcile "disabled" is left out of apply and prune
// (Skipped); one carrying AnnotationPrune "disabled" is never pruned.
//
// Every applied object carries the label projection.LabelEngineInstance
// and the annotations projection.AnnotationEngineRevision, ...Run,
// ...AppliedAt and AnnotationDesiredHash; the first three change only when
// the desired state changes (a self-heal re-sends the values live carries).
//
// # Runs
//
// One run of each kind (dry or not) executes at a time. A Reconcile caller
// joins the run in flight while it has not begun to fetch, else the one
// queued behind it, so a webhook or request that arrives during a run
// leads to a run that fetches after it. A run uses a context detached from
// any one caller, so a caller that goes away does not cancel the others'
// run. The loop runs every Config.Interval (never when it is zero) and at
// once when Trigger is called (triggers coalesce). A fetch that fails uses
// the last good commit in the cache (this process's, or one a previous
// process left), so drift is still healed while git is down; the state
// says stale, with the error and since when. A panic anywhere in a run
// (render, an apply worker, prune) becomes that run's error, in the state,
// the log and the OnRun hook. Each run writes one audit line (slog) with
// its id, trigger, revision and counts; credentials are never logged or
// put in an error.
//
// # Replicas
//
// With Config.Lease (serve always sets it) every replica campaigns for a
// coordination.k8s.io/v1 Lease through client-go's leaderelection, and only
// its holder runs the engine and writes, to the cluster and to git. Its
// runs live in the term's context, which ends when a renewal fails for
// RenewDeadline; before every write (apply, delete, push, the state) it
// also checks that its last renewal is younger than that, so a leader that
// was paused writes nothing once another may hold the Lease. The leader
// keeps the state (leader and its URL, runs, last run, staleness,
// suspension) in a ConfigMap of the Lease's name, which every replica
// watches: Status answers alike everywhere, and a new leader carries on
// from it. A replica that does not lead keeps its view of the repository
// (Desired, Manages) at the leader's revision by reading git, never
// writing. The routes forward what only the leader does to its URL.
// Whether an App is managed is its tracking label, never this process's
// memory.
//
// # Write-back
//
// With Config.Push, WriteTag makes a rollback or release of a managed App a
// commit. The file that declares the App is found in the
// branch's head commit, whatever this process has run; EditTag changes
// only the bytes of that App's spec.image.tag scalar, in its own quoting,
// so comments, key order and every other byte of a file of one or many
// documents are kept. The commit is built from objects (blob, the trees up
// to the root, the commit) in a full bare clone of the branch beside the
// run's shallow cache: its author is the caller, its committer deployd,
// its message "deploy: roll back <ns>/<name> to <tag>" or "deploy: release
// <ns>/<name> <tag>" with a Request-Id trailer, every part reduced to
// characters that cannot break a line. It is pushed to the engine's branch
// only, never forced; a non-fast-forward is fetched, edited again and
// pushed again, at most pushAttempts pushes in all, then a WriteError with
// Conflict. Then the engine reconciles at once, in a run that fetches
// after the push. While suspended nothing is committed. Write-backs run
// one at a time (one mutex), so two of different Apps both land. History
// reads the same clone: the commits that touched the App's file, newest
// first, with the tag each declares; it is a read-side join made by the
// routes, never folded.
//
// # What the engine never does
//
// Apply a kind outside the allow-list, write outside the namespace map,
// push to another branch, force a push, commit a change to another file or
// line, render anything but the commit's regular files (no URL, remote
// base, Helm chart or symlink), create a namespace, delete an object without
// the instance label, prune past the fuse, or send credentials over plain
// http to a host other than a loopback one. It never talks to the
// projection or the stream: what it applies comes back through the watch.
//
// The reasons for go-git, the in-process render, the apply without a dry
// run per object, the Lease and the write-back are decision records
// 0005 to 0009 in docs/decisions.
package engine
