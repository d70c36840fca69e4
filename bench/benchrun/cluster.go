package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/zktest"
)

// With --replication N > 1 every measurement starts a cluster of N brokers
// of each system instead of one:
//
//   - Sluice: a ZooKeeper server (Debian's, via internal/zktest) and N
//     `sluice serve` processes with their own broker.id, listener and log
//     directory, coordinated under the chroot /sluice-bench;
//   - kfake: one kfakeserver process running N brokers (kfake keeps one copy
//     of the data whatever the replication factor);
//   - NATS JetStream: N nats-server processes routed into one cluster.
//
// The broker CPU of a phase and the peak RSS of a measurement are sums over
// the broker processes; ZooKeeper is not counted.

// clusterTimeout bounds the wait for a cluster to form once every process
// listens.
const clusterTimeout = 60 * time.Second

// deployment is the running processes of one measurement.
type deployment struct {
	procs []*server
	zk    *zktest.Server
	zkLog *os.File
	addr  string // the client's bootstrap address(es)
}

// cpuSeconds is the CPU time the broker processes have used so far.
func (d *deployment) cpuSeconds() (float64, error) {
	var sum float64
	for _, p := range d.procs {
		if p.spec.Helper {
			continue
		}
		v, err := cpuSeconds(p.pid())
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// peakRSSKiB is the sum of the broker processes' peak resident sets.
func (d *deployment) peakRSSKiB() (int64, error) {
	var sum int64
	for _, p := range d.procs {
		if p.spec.Helper {
			continue
		}
		v, err := peakRSSKiB(p.pid())
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// stop stops the brokers (together, each waiting up to 20 s before a kill),
// later stages first, and then ZooKeeper.
func (d *deployment) stop() {
	last := 0
	for _, p := range d.procs {
		last = max(last, p.spec.Stage)
	}
	for stage := last; stage >= 0; stage-- {
		var wg sync.WaitGroup
		for _, p := range d.procs {
			if p.spec.Stage != stage {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.stop()
			}()
		}
		wg.Wait()
	}
	if d.zk != nil {
		d.zk.Close()
	}
	if d.zkLog != nil {
		d.zkLog.Close()
	}
}

// deploy starts sys with n brokers, their data under dir and their logs in
// logDir as <tag>-broker[-i].log; env goes to the first broker. It returns
// once every broker listens and, for a cluster, once the cluster has formed.
// On error everything it started is stopped.
func deploy(ctx context.Context, sys *system, n int, dir, logDir, tag string, env []string) (d *deployment, err error) {
	l, err := newLayout(n, dir)
	if err != nil {
		return nil, err
	}
	d = &deployment{}
	defer func() {
		if err != nil {
			d.stop()
			d = nil
		}
	}()
	if n > 1 && sys.zookeeper {
		if err := zktest.Available(); err != nil {
			return d, err
		}
		if d.zkLog, err = os.Create(filepath.Join(logDir, tag+"-zookeeper.log")); err != nil {
			return d, err
		}
		d.zk, err = zktest.StartServer(zktest.Options{Dir: filepath.Join(dir, "zookeeper"), Log: d.zkLog})
		if err != nil {
			return d, fmt.Errorf("starting ZooKeeper for %s: %w", sys.Name, err)
		}
		l.ZK = d.zk.Addr()
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
	}
	specs := sys.procs(l)
	last := 0
	for _, spec := range specs {
		last = max(last, spec.Stage)
	}
	// Processes of one stage start together; the next stage once they
	// all listen.
	for stage := 0; stage <= last; stage++ {
		procs := make([]*server, len(specs))
		errs := make([]error, len(specs))
		var wg sync.WaitGroup
		for i, spec := range specs {
			if spec.Stage != stage {
				continue
			}
			name, logPath := sys.Name, filepath.Join(logDir, tag+"-broker.log")
			if len(specs) > 1 {
				name = fmt.Sprintf("%s process %d", sys.Name, i+1)
				logPath = filepath.Join(logDir, fmt.Sprintf("%s-broker-%d.log", tag, i+1))
			}
			var penv []string
			if i == 0 {
				penv = env
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				procs[i], errs[i] = startProc(ctx, name, spec, logPath, penv...)
			}()
		}
		wg.Wait()
		for _, p := range procs {
			if p != nil {
				d.procs = append(d.procs, p)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return d, err
		}
	}
	if n > 1 && sys.ready != nil {
		rctx, cancel := context.WithTimeout(ctx, clusterTimeout)
		defer cancel()
		if err := sys.ready(rctx, l); err != nil {
			return d, fmt.Errorf("%s cluster of %d did not form within %v: %w", sys.Name, n, clusterTimeout, err)
		}
	}
	if sys.setup != nil {
		sctx, cancel := context.WithTimeout(ctx, clusterTimeout)
		defer cancel()
		if err := sys.setup(sctx, l); err != nil {
			return d, fmt.Errorf("%s setup: %w", sys.Name, err)
		}
	}
	d.addr = sys.addr(l)
	return d, nil
}

// poll calls check every 100 ms until it returns nil or ctx ends, returning
// check's last error then.
func poll(ctx context.Context, check func(ctx context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kafkaReady waits until every broker of l answers Metadata listing all
// l.Brokers brokers and a controller.
func kafkaReady(ctx context.Context, l layout) error {
	for _, port := range l.Ports {
		addr := localAddr(port)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			return err
		}
		err = poll(ctx, func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
			resp, err := req.RequestWith(rctx, &seedOnly{cl})
			if err != nil {
				return fmt.Errorf("metadata from %s: %w", addr, err)
			}
			if len(resp.Brokers) != l.Brokers || resp.ControllerID < 0 {
				return fmt.Errorf("broker %s lists %d of %d brokers (controller %d)", addr, len(resp.Brokers), l.Brokers, resp.ControllerID)
			}
			return nil
		})
		cl.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// seedOnly sends every request to the client's seed broker, so a check asks
// the broker it means to.
type seedOnly struct{ cl *kgo.Client }

func (s *seedOnly) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	seeds := s.cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	return seeds[0].Request(ctx, req)
}

// jsz is the part of nats-server's /jsz monitoring answer natsReady reads.
type jsz struct {
	Meta *struct {
		Leader      string `json:"leader"`
		ClusterSize int    `json:"cluster_size"`
		Replicas    []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

// natsReady waits until every server of l knows the same JetStream meta
// leader of an l.Brokers-server cluster, and the leader sees every other
// server as current.
func natsReady(ctx context.Context, l layout) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, func(ctx context.Context) error {
		leader, current := "", 0
		for _, port := range l.Monitor {
			url := "http://" + localAddr(port) + "/jsz"
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			var j jsz
			err = json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", url, err)
			}
			switch {
			case j.Meta == nil || j.Meta.Leader == "":
				return fmt.Errorf("%s: no JetStream meta leader yet", url)
			case j.Meta.ClusterSize != l.Brokers:
				return fmt.Errorf("%s: meta cluster of %d, want %d", url, j.Meta.ClusterSize, l.Brokers)
			case leader != "" && j.Meta.Leader != leader:
				return fmt.Errorf("%s: meta leader %s, another server says %s", url, j.Meta.Leader, leader)
			}
			leader = j.Meta.Leader
			if len(j.Meta.Replicas) > 0 { // only the leader lists its followers
				current = 0
				for _, r := range j.Meta.Replicas {
					if r.Current {
						current++
					}
				}
			}
		}
		if current != l.Brokers-1 {
			return fmt.Errorf("meta leader %s has %d of %d followers current", leader, current, l.Brokers-1)
		}
		return nil
	})
}
