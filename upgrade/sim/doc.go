// Package sim is an embedded imitation of the UpGrade 6.5 backend (and, on
// request, of the 6.2 wire shapes). It serves the REST API of
// spec/upgrade-api.md under /api over real net/http, so that the client, the
// scenarios, `sim serve` and the condition-balance job exercise the same code
// paths they use against a real server.
//
// What it is for: every point of upgrade-api.md a client can observe (answer
// shapes, display state names, replaced condition and decision point ids, the
// array answered by DELETE, error bodies and statuses, HTML 404 pages,
// validation failures) and assignment for real: the server's own weighted
// draw (seedrandom's ARC4 seeded with experiment and user id, so the same ids
// draw the same conditions as on UpGrade), individual and group consistency,
// inclusion and exclusion lists, exclude-if-reached, post-experiment rules,
// shared decision points, marks and the enrollment statistics computed from
// them; and the results side: metrics, experiment queries, client logs and
// the per-condition analysis of upgrade-results-designs.md. State can be persisted to a
// JSON file shared by several processes (file lock, atomic replace).
//
// What it must not do: it must not become a second implementation of the
// client (tests here speak plain net/http and encoding/json), it must not
// enforce rules the real server does not enforce (state transitions, unique
// names, weight sums: the client checks those), and it never listens on
// anything but the address it is given (loopback by default).
package sim
