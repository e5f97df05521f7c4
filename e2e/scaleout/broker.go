// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is an in-process Kafka broker speaking the Kafka wire protocol
// (kfake), holding one topic.
type Broker struct {
	cluster *kfake.Cluster
	// Addr is where it listens, 127.0.0.1:PORT.
	Addr string
	// Topic and Partitions name the topic and its partition count.
	Topic      string
	Partitions int
}

// StartBroker starts a broker on a free loopback port with topic made of
// partitions partitions.
func StartBroker(topic string, partitions int) (*Broker, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		return nil, fmt.Errorf("kafka broker: %w", err)
	}
	return &Broker{cluster: c, Addr: c.ListenAddrs()[0], Topic: topic, Partitions: partitions}, nil
}

// Close stops the broker.
func (b *Broker) Close() { b.cluster.Close() }
