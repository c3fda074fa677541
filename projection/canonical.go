package projection

import "encoding/json"

// Canonical encodes everything the snapshot serves — every row's
// Application and tree, the CD Applications and the projects — without
// revisions. Two stores holding the same set of objects produce the same
// bytes, whatever order the objects arrived in; it is how convergence is
// checked and a cheap fingerprint of a state.
func (s *Snapshot) Canonical() []byte {
	type row struct {
		Application Application     `json:"application"`
		Tree        ApplicationTree `json:"tree"`
		Native      NativeTree      `json:"native"`
	}
	type canonical struct {
		Rows     []row     `json:"rows"`
		CD       []row     `json:"cd"`
		Projects []Project `json:"projects"`
		Tenants  map[string][]string
	}
	enc := func(a *App) row {
		c := a.next()
		c.Revision, c.TreeRevision = 0, 0
		return row{Application: c.Application(), Tree: c.ApplicationTree(), Native: c.NativeTree()}
	}
	out := canonical{Rows: []row{}, CD: []row{}, Projects: nonNil(s.projects), Tenants: map[string][]string{}}
	for a := range s.Apps() {
		out.Rows = append(out.Rows, enc(a))
	}
	for _, a := range s.cd {
		out.CD = append(out.CD, enc(a))
	}
	for _, nr := range s.namespaces {
		if nr.Org == "" {
			continue
		}
		names := []string{}
		for _, a := range nr.Tenant {
			names = append(names, a.Name)
		}
		out.Tenants[nr.Org] = names
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		panic("projection: canonical: " + err.Error())
	}
	return b
}
