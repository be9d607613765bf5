// Package service is the renter's service reconciler (docs/SERVICES.md):
// the decisions that keep a service's replicas, with no I/O and no clock
// of its own. A Reconciler is fed what the node observed (the replicas'
// jobs, the gateway's readiness and load, the count service_scale fixed)
// with the time, and returns the Actions to carry out: place a replica
// (a replacement, one more, or a successor before a lease ends), release,
// drop, cancel or retire a job, save the record, log. The node does the
// I/O (auctions, the gateway, the store) and reports each placement back
// with Placed, as etcd's raft hands back what to send and persist.
//
// What it decides, each as the node decided it before:
//
//   - the replica count: the count service_scale fixed, else the
//     autoscaler's (autoscale.go), else replicas.min, never below the
//     floor; a scale-down removes the highest indices, so the floor's
//     replicas (the lowest) stay;
//   - each replica's spec (ReplicaSpec): the floor's tier and price below
//     floor.replicas, the spec's tier (bronze, say) above; a gold one's
//     start moved past its purchase; its replica_placement entry;
//   - placement on distinct providers: a Place excludes the providers
//     the other live replicas hold, and avoids one a replica was lost with;
//   - readiness: a replica running but not ready within
//     readiness.initial_delay plus ReadyGrace is given up (cancelled);
//   - healing: a replica whose job ended is replaced at its index, with
//     back-off (HealBackoff) after replicas that never got ready or that
//     no provider took, and no more after HealLimit in a row that never
//     got ready;
//   - make-before-break renewal (renew.go);
//   - why no replica is placed (Record.NotPlaced).
package service
