package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
)

// metaPropertiesFile is Kafka's per-log-dir identity file: which broker and
// which cluster the data belongs to.
const metaPropertiesFile = "meta.properties"

type metaProperties struct {
	brokerID  int32
	clusterID string
}

// readMetaProperties reads meta.properties from every log dir that has one;
// they must agree.
func readMetaProperties(dirs []string) (*metaProperties, error) {
	var found *metaProperties
	var foundIn string
	for _, d := range dirs {
		path := filepath.Join(d, metaPropertiesFile)
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		props, err := config.ReadProperties(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		mp := &metaProperties{brokerID: -1}
		for _, p := range props {
			switch p.Key {
			case "broker.id":
				n, err := strconv.ParseInt(p.Value, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%s: broker.id %q is not a number", path, p.Value)
				}
				mp.brokerID = int32(n)
			case "cluster.id":
				mp.clusterID = p.Value
			}
		}
		if found != nil && (found.brokerID != mp.brokerID || found.clusterID != mp.clusterID) {
			return nil, fmt.Errorf("log dirs disagree: %s says broker.id=%d cluster.id=%s, %s says broker.id=%d cluster.id=%s",
				filepath.Join(foundIn, metaPropertiesFile), found.brokerID, found.clusterID, path, mp.brokerID, mp.clusterID)
		}
		found, foundIn = mp, d
	}
	return found, nil
}

// writeMetaProperties writes meta.properties into every log dir.
func writeMetaProperties(dirs []string, mp metaProperties) error {
	content := fmt.Sprintf("#\n#%s\nversion=0\nbroker.id=%d\ncluster.id=%s\n",
		time.Now().UTC().Format(time.UnixDate), mp.brokerID, mp.clusterID)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := cluster.WriteFileAtomic(filepath.Join(d, metaPropertiesFile), []byte(content)); err != nil {
			return err
		}
	}
	return nil
}

// resolveIdentity settles the broker id and checks the cluster id the way
// Kafka does: a configured broker.id must match the one stored in
// meta.properties (InconsistentBrokerIdException), -1 takes the stored one
// or generates a new one, and the stored cluster id must be the
// coordinator's (InconsistentClusterIdException).
func resolveIdentity(cfg *Config, clusterID string, generate func() (int32, error)) (int32, error) {
	stored, err := readMetaProperties(cfg.LogDirs)
	if err != nil {
		return -1, err
	}
	id := cfg.BrokerID
	if stored != nil {
		if stored.clusterID != "" && stored.clusterID != clusterID {
			return -1, fmt.Errorf("the cluster id %s in meta.properties of %s does not match the cluster id %s of the metadata: these log dirs belong to another cluster "+
				"(if the metadata was lost, removing meta.properties lets a single node adopt the logs as new topics)",
				stored.clusterID, strings.Join(cfg.LogDirs, ","), clusterID)
		}
		if id >= 0 && stored.brokerID >= 0 && id != stored.brokerID {
			return -1, fmt.Errorf("configured broker.id %d does not match broker.id %d stored in meta.properties of %s: change broker.id or use other log.dirs",
				id, stored.brokerID, strings.Join(cfg.LogDirs, ","))
		}
		if id < 0 {
			id = stored.brokerID
		}
	}
	if id < 0 {
		if id, err = generate(); err != nil {
			return -1, fmt.Errorf("generate broker id: %w", err)
		}
	}
	if stored == nil || stored.brokerID != id || stored.clusterID != clusterID {
		if err := writeMetaProperties(cfg.LogDirs, metaProperties{brokerID: id, clusterID: clusterID}); err != nil {
			return -1, fmt.Errorf("write meta.properties: %w", err)
		}
	}
	return id, nil
}
