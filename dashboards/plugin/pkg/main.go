// SPDX-License-Identifier: Apache-2.0

// Command gpx_errorownership is the backend of the errorownership Grafana
// data source. Grafana starts it, as it starts every backend plugin, with
// the plugin handshake (github.com/hashicorp/go-plugin) and speaks the
// plugin protocol to it over gRPC; it is not meant to be run by hand.
// make plugin builds it into ../dist for linux/amd64 and linux/arm64.
package main

import (
	"os"

	"github.com/grafana/grafana-plugin-sdk-go/backend/datasource"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
)

func main() {
	// Manage serves until Grafana ends the process, making one instance
	// per data source and a new one when its settings change.
	if err := datasource.Manage(plugin.ID, plugin.NewDatasource, datasource.ManageOpts{}); err != nil {
		log.DefaultLogger.Error(err.Error())
		os.Exit(1)
	}
}
