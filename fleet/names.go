package fleet

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
)

// UID is the deterministic uid of the object of kind (e.g. "Deployment") at
// namespace/name: a version-5-style UUID of the three, so owner references
// between rendered objects resolve without an API server.
func UID(namespace, kind, name string) string {
	h := sha1.Sum([]byte(namespace + "\x00" + kind + "\x00" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// safeAlphabet is the alphabet Kubernetes uses for generated name suffixes
// (no vowels, no look-alike characters).
const safeAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// safeEncode maps each byte of s into safeAlphabet, as Kubernetes'
// rand.SafeEncodeString does with the pod-template hash.
func safeEncode(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = safeAlphabet[int(c)%len(safeAlphabet)]
	}
	return string(b)
}

// TemplateHash is the pod-template-hash of the App's pod template running
// tpl: like Kubernetes', an FNV-32a hash of the template, safe-encoded.
func TemplateHash(app *App, tpl Template) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%s\x00%s:%s\x00%s\x00%d\x00%s", app.Namespace, app.Name, app.Repository, tpl.Tag, app.Sidecar, app.Port, tpl.RestartedAt)
	return safeEncode(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// ReplicaSetName is the name of the App's ReplicaSet for tpl.
func ReplicaSetName(app *App, tpl Template) string {
	return app.Name + "-" + TemplateHash(app, tpl)
}

// PodName is the name of the n-th pod a ReplicaSet creates: its name and a
// five-character suffix.
func PodName(replicaSet string, n int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", replicaSet, n)
	v := h.Sum64()
	var suffix [5]byte
	for i := range suffix {
		suffix[i] = safeAlphabet[v%uint64(len(safeAlphabet))]
		v /= uint64(len(safeAlphabet))
	}
	return replicaSet + "-" + string(suffix[:])
}

// nodeName is the node a pod runs on, from its name.
func nodeName(pod string) string {
	return "pool-a-" + strconv.Itoa(int(hash32(pod)%6)+1)
}

// podIP is the address of a pod, from its name.
func podIP(pod string) string {
	h := hash32(pod)
	return fmt.Sprintf("10.%d.%d.%d", 16+h%16, (h>>8)%256, 2+(h>>16)%250)
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// digest is a stable sha256-looking digest for an image, for imageID.
func digest(image string) string {
	h := sha1.Sum([]byte(image))
	h2 := sha1.Sum([]byte("x" + image))
	return "sha256:" + hex.EncodeToString(h[:]) + hex.EncodeToString(h2[:12])
}
