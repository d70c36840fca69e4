package main

// sluice cluster: the brokers, the controller and the partitions that need
// attention, in one look.

import (
	"context"
	"fmt"
)

func init() {
	registerSimple("cluster", "show brokers, the controller and under-replicated or offline partitions", clusterRun)
}

type clusterJSON struct {
	ClusterID       string               `json:"cluster_id"`
	Controller      int32                `json:"controller"`
	Brokers         []brokerJSON         `json:"brokers"`
	Topics          int                  `json:"topics"`
	Partitions      int                  `json:"partitions"`
	UnderReplicated []partitionStateJSON `json:"under_replicated"`
	Offline         []partitionStateJSON `json:"offline"`
}

type brokerJSON struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

type partitionStateJSON struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	Error           string  `json:"error,omitempty"`
}

func clusterRun(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "cluster [flags]",
		"Show the cluster id, the controller, every live broker, and the partitions\n"+
			"that are under-replicated (ISR smaller than the replica set) or offline (no\n"+
			"leader). With --check the exit code is 1 when any partition is either.", true)
	check := fs.Bool("check", false, "exit 1 when a partition is under-replicated or offline")
	ctx, adm, _, done, err := cf.parseAndConnect(ctx, fs, args, noArgs)
	if err != nil {
		return err
	}
	defer done()
	m, err := adm.Metadata(ctx)
	if err != nil {
		return errKafka("metadata", err)
	}

	out := clusterJSON{ClusterID: m.Cluster, Controller: m.Controller, Brokers: []brokerJSON{},
		Topics: len(m.Topics), UnderReplicated: []partitionStateJSON{}, Offline: []partitionStateJSON{}}
	for _, b := range m.Brokers {
		bj := brokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == m.Controller}
		if b.Rack != nil {
			bj.Rack = *b.Rack
		}
		out.Brokers = append(out.Brokers, bj)
	}
	for _, t := range m.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			out.Partitions++
			ps := partitionStateJSON{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: append([]int32{}, p.Replicas...), ISR: sortedInt32(p.ISR), OfflineReplicas: sortedInt32(p.OfflineReplicas)}
			if p.Err != nil {
				ps.Error = p.Err.Error()
			}
			if p.Leader < 0 {
				out.Offline = append(out.Offline, ps)
			} else if len(p.ISR) < len(p.Replicas) {
				out.UnderReplicated = append(out.UnderReplicated, ps)
			}
		}
	}

	if cf.json() {
		err = writeJSON(env.stdout, out)
	} else {
		err = clusterTable(env, out)
	}
	if err != nil {
		return err
	}
	if *check && (len(out.UnderReplicated) > 0 || len(out.Offline) > 0) {
		return fmt.Errorf("%d under-replicated and %d offline partitions", len(out.UnderReplicated), len(out.Offline))
	}
	return nil
}

func clusterTable(env *cliEnv, c clusterJSON) error {
	controller := fmt.Sprint(c.Controller)
	if c.Controller < 0 {
		controller = "none"
	}
	tb := newCLITable(env.stdout, "CLUSTER-ID", "CONTROLLER", "BROKERS", "TOPICS", "PARTITIONS", "UNDER-REPLICATED", "OFFLINE")
	tb.row(c.ClusterID, controller, len(c.Brokers), c.Topics, c.Partitions, len(c.UnderReplicated), len(c.Offline))
	if err := tb.flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout)
	tb = newCLITable(env.stdout, "BROKER", "HOST", "PORT", "RACK", "CONTROLLER")
	for _, b := range c.Brokers {
		isController := ""
		if b.Controller {
			isController = "yes"
		}
		tb.row(b.ID, b.Host, b.Port, b.Rack, isController)
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if len(c.UnderReplicated)+len(c.Offline) == 0 {
		return nil
	}
	fmt.Fprintln(env.stdout)
	tb = newCLITable(env.stdout, "STATE", "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE-REPLICAS")
	for _, p := range c.Offline {
		tb.row("offline", p.Topic, p.Partition, "none", int32List(p.Replicas), int32List(p.ISR), int32List(p.OfflineReplicas))
	}
	for _, p := range c.UnderReplicated {
		tb.row("under-replicated", p.Topic, p.Partition, p.Leader, int32List(p.Replicas), int32List(p.ISR), int32List(p.OfflineReplicas))
	}
	return tb.flush()
}
