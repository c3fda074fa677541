package cluster

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hanzoai/deploy/projection"
)

// Get reads one object of a registry kind from the API server, live (the
// informer caches hold summaries only). A kind outside the registry
// is refused before any request: no ref can reach a Secret.
func (w *Watcher) Get(ctx context.Context, kind projection.Kind, namespace, name string) (map[string]any, error) {
	if !kind.InRegistry() {
		return nil, fmt.Errorf("%s: %w", kind, projection.ErrUnknownKind)
	}
	if w.dyn == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConfigured, w.reason)
	}
	u, err := w.dyn.Resource(kind.GVR()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

// PodLogs streams a container's log through the API server (the kubelet
// behind it). tail and limitBytes bound what is read; with timestamps each
// line starts with its RFC 3339 time and a space.
func (w *Watcher) PodLogs(ctx context.Context, namespace, pod, container string, tail, limitBytes int64, follow, timestamps bool) (io.ReadCloser, error) {
	if w.core == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConfigured, w.reason)
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: follow, Timestamps: timestamps}
	if tail > 0 {
		opts.TailLines = &tail
	}
	if limitBytes > 0 {
		opts.LimitBytes = &limitBytes
	}
	return w.core.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}
