package projection

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testSHA = "0123456789abcdef0123456789abcdef01234567"

// managedApp is an App named web in hanzo, applied by the engine instance
// inst at testSHA by run r-7 at 12:00:00 (no mark when inst is ""), with
// the extra annotations given.
func managedApp(t *testing.T, inst string, generation, observed int64, ann map[string]any) *Object {
	t.Helper()
	labels := map[string]any{}
	annotations := map[string]any{}
	if inst != "" {
		labels[LabelEngineInstance] = inst
		annotations[AnnotationEngineRevision] = testSHA
		annotations[AnnotationEngineRun] = "r-7"
		annotations[AnnotationEngineAppliedAt] = "2026-11-30T12:00:00Z"
	}
	for k, v := range ann {
		annotations[k] = v
	}
	o, err := Decode(map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "web", "namespace": "hanzo", "uid": "u-web", "resourceVersion": "5",
			"generation": generation, "labels": labels, "annotations": annotations},
		"spec":   map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/web", "tag": "v1.2.0"}},
		"status": map[string]any{"phase": "Running", "readyReplicas": int64(1), "observedGeneration": observed},
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// webDeployment is the App's Deployment, rolled out on v1.2.0.
func webDeployment(t *testing.T) *Object {
	t.Helper()
	o, err := Decode(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "hanzo", "uid": "u-web-d", "resourceVersion": "9", "generation": int64(1),
			"ownerReferences": []any{map[string]any{"apiVersion": "hanzo.ai/v1", "kind": "App", "name": "web", "uid": "u-web", "controller": true}}},
		"spec": map[string]any{"replicas": int64(1), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "ghcr.io/hanzoai/web:v1.2.0"}}}}},
		"status": map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func engineConfig(instance string) Config {
	cfg := DefaultConfig()
	cfg.Engine = &EngineSource{Repo: "https://git.example/universe", Ref: "main", Path: "crs"}
	cfg.EngineInstance = instance
	return cfg
}

// TestManagedApplication: an App the engine applied shows the engine's
// source, its commit as the sync revision and the run as the operation;
// an in-flight sync, or one asked for after the run, shows instead.
func TestManagedApplication(t *testing.T) {
	engineSource := ApplicationSource{RepoURL: "https://git.example/universe", Path: "crs", TargetRevision: "main"}
	displaySource := ApplicationSource{RepoURL: "https://github.com/hanzoai/universe", Path: "infra/k8s/operator/crs/hanzo/web", TargetRevision: "HEAD"}
	engineOp := &OperationState{
		Operation:  Operation{Sync: SyncOperation{Revision: testSHA}, InitiatedBy: OperationInitiator{Automated: true}},
		Phase:      "Succeeded",
		Message:    "engine run r-7 applied revision " + testSHA,
		StartedAt:  "2026-11-30T12:00:00Z",
		FinishedAt: "2026-11-30T12:00:00Z",
		SyncResult: &SyncOperationResult{Revision: testSHA},
	}
	for _, tc := range []struct {
		name        string
		cfg         Config
		inst        string
		generation  int64
		ann         map[string]any
		wantSource  ApplicationSource
		wantRev     string
		wantOp      *OperationState
		wantOpPhase string // when the sync annotation's operation shows
	}{
		{name: "managed", cfg: engineConfig("universe"), inst: "universe", wantSource: engineSource, wantRev: testSHA, wantOp: engineOp},
		{name: "any instance", cfg: engineConfig(""), inst: "other", wantSource: engineSource, wantRev: testSHA, wantOp: engineOp},
		{name: "another instance", cfg: engineConfig("universe"), inst: "other", wantSource: displaySource, wantRev: testSHA, wantOp: engineOp},
		{name: "engine disabled", cfg: DefaultConfig(), inst: "universe", wantSource: displaySource, wantRev: testSHA, wantOp: engineOp},
		{name: "not managed", cfg: engineConfig("universe"), wantSource: displaySource, wantRev: "v1.2.0"},
		{name: "instance without revision", cfg: engineConfig("universe"), ann: map[string]any{LabelEngineInstance: "x"}, wantSource: displaySource, wantRev: "v1.2.0"},
		{name: "sync in flight", cfg: engineConfig("universe"), inst: "universe", generation: 2,
			ann:        map[string]any{AnnotationSyncRequestedAt: "2026-11-30T11:00:00Z", AnnotationSyncRequestedBy: "root"},
			wantSource: engineSource, wantRev: testSHA, wantOpPhase: "Running"},
		{name: "sync before the run", cfg: engineConfig("universe"), inst: "universe",
			ann:        map[string]any{AnnotationSyncRequestedAt: "2026-11-30T11:00:00Z"},
			wantSource: engineSource, wantRev: testSHA, wantOp: engineOp},
		{name: "sync after the run", cfg: engineConfig("universe"), inst: "universe",
			ann:        map[string]any{AnnotationSyncRequestedAt: "2026-11-30T13:00:00Z"},
			wantSource: engineSource, wantRev: testSHA, wantOpPhase: "Succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(tc.cfg)
			if _, err := s.Apply(Change{Op: Upsert, Object: managedApp(t, tc.inst, tc.generation, 0, tc.ann)}, Change{Op: Upsert, Object: webDeployment(t)}); err != nil {
				t.Fatal(err)
			}
			a := s.Snapshot().Get("hanzo", "web")
			var got Application
			if err := json.Unmarshal(a.ApplicationJSON(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantSource, got.Spec.Source); diff != "" {
				t.Errorf("spec.source (-want +got):\n%s", diff)
			}
			if got.Status.Sync.Revision != tc.wantRev {
				t.Errorf("status.sync.revision: got %q, want %q", got.Status.Sync.Revision, tc.wantRev)
			}
			op := got.Status.OperationState
			switch {
			case tc.wantOpPhase != "":
				if op == nil || op.Phase != tc.wantOpPhase || op.SyncResult != nil || op.Operation.Sync.Revision != "v1.2.0" {
					t.Errorf("operationState: got %+v, want the sync annotation's, %s", op, tc.wantOpPhase)
				}
			default:
				if diff := cmp.Diff(tc.wantOp, op); diff != "" {
					t.Errorf("operationState (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestManagedAppNewRun: a run that re-applies the App changes its
// Application (a new revision on list, detail and stream) even when
// nothing else about it changed; the same version delivered again (a
// resync) changes nothing.
func TestManagedAppNewRun(t *testing.T) {
	s := NewStore(engineConfig("universe"))
	first := managedApp(t, "universe", 1, 1, nil)
	if _, err := s.Apply(Change{Op: Upsert, Object: first}); err != nil {
		t.Fatal(err)
	}
	again := managedApp(t, "universe", 1, 1, nil)
	again.ResourceVersion = first.ResourceVersion
	deltas, err := s.Apply(Change{Op: Upsert, Object: again})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deltas {
		if d.AppChanged {
			t.Fatalf("the same marks changed the Application: %+v", d)
		}
	}
	next := managedApp(t, "universe", 1, 1, map[string]any{AnnotationEngineRevision: "fedcba9876543210fedcba9876543210fedcba98", AnnotationEngineRun: "r-8"})
	next.ResourceVersion = "7"
	deltas, err = s.Apply(Change{Op: Upsert, Object: next})
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 1 || !deltas[0].AppChanged {
		t.Fatalf("a new run's marks: got deltas %+v, want the Application changed", deltas)
	}
	var got Application
	if err := json.Unmarshal(s.Snapshot().Get("hanzo", "web").ApplicationJSON(), &got); err != nil {
		t.Fatal(err)
	}
	if op := got.Status.OperationState; got.Status.Sync.Revision != "fedcba9876543210fedcba9876543210fedcba98" || op == nil ||
		op.Message != "engine run r-8 applied revision fedcba9876543210fedcba9876543210fedcba98" {
		t.Fatalf("after run r-8: sync %+v, operation %+v", got.Status.Sync, op)
	}
}

// TestEngineMarkDecoding: the marks are read at decode time; an applied-at
// that is not RFC 3339 reads as absent.
func TestEngineMarkDecoding(t *testing.T) {
	o := managedApp(t, "universe", 1, 1, map[string]any{AnnotationEngineAppliedAt: "yesterday"})
	got := o.Spec.(*AppSpec).Engine
	want := &EngineMark{Instance: "universe", Revision: testSHA, Run: "r-7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("mark (-want +got):\n%s", diff)
	}
	if m := managedApp(t, "", 1, 1, nil).Spec.(*AppSpec).Engine; m != nil {
		t.Fatalf("an unmarked App: got %+v, want nil", m)
	}
}
