// SPDX-License-Identifier: Apache-2.0

// Package plugin is the errorownership Grafana data source's backend: it
// reads the errorownership store (store.Store) for what SQL alone cannot
// do well — the service graph with error ownership as Node Graph frames,
// the edge model judged by the engine's rule, and the hints a service would
// get from the collector.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/instancemgmt"
	"github.com/grafana/grafana-plugin-sdk-go/data"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/errorownership/errorownership/store"
)

// ID is the plugin's ID, as in plugin.json.
const ID = "errorownership-store-datasource"

// The query types (a query's queryType).
const (
	// QueryServiceGraph: the services and the calls between them in the
	// time range, as the Node Graph panel's nodes and edges frames.
	QueryServiceGraph = "serviceGraph"
	// QueryEdgeModel: every edge of the edge model the collector judges by
	// now, with its mode, confidence and evidence.
	QueryEdgeModel = "edgeModel"
	// QueryHints: the ownership hints the service would get from the
	// collector now.
	QueryHints = "hints"
)

// Query is a query's model: what the query editor sets.
type Query struct {
	QueryType string `json:"queryType"`
	// Service restricts a service graph or an edge model to a service (its
	// direct callers and callees, its own edges); empty is every service.
	// Hints need one.
	Service string `json:"service"`
}

// minSchemaVersion is the oldest store schema the queries read; version 3
// adds the indexes that make the reads of one service fast.
const minSchemaVersion = 2

// servicesWindow is how far back the query editor's list of services looks.
const servicesWindow = 24 * time.Hour

var (
	_ backend.QueryDataHandler      = (*Datasource)(nil)
	_ backend.CheckHealthHandler    = (*Datasource)(nil)
	_ backend.CallResourceHandler   = (*Datasource)(nil)
	_ instancemgmt.InstanceDisposer = (*Datasource)(nil)
)

// Datasource is one data source instance: its settings and its
// connections to the store. Grafana makes a new one when the settings
// change and disposes of the old.
type Datasource struct {
	settings Settings
	// err is why the settings cannot be used; every request reports it.
	err   error
	pool  *pgxpool.Pool
	store *store.Store
	now   func() time.Time
}

// NewDatasource returns the instance for a data source's settings. Bad
// settings do not fail it: the health check and every query say what is
// wrong and how to fix it.
func NewDatasource(_ context.Context, s backend.DataSourceInstanceSettings) (instancemgmt.Instance, error) {
	d := &Datasource{now: time.Now}
	d.settings, d.err = LoadSettings(s.JSONData, s.DecryptedSecureJSONData)
	if d.err != nil {
		return d, nil
	}
	pcfg, err := pgxpool.ParseConfig(d.settings.DSN)
	if err != nil {
		d.err = errors.New("store.dsn cannot be parsed; use postgres://user@host:5432/dbname or host=... dbname=... user=... pairs")
		return d, nil
	}
	if d.settings.Password != "" {
		pcfg.ConnConfig.Password = d.settings.Password
	}
	params := pcfg.ConnConfig.RuntimeParams
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "errorownership-grafana"
	}
	// The plugin only reads; a database user that may write cannot be
	// made to by it.
	params["default_transaction_read_only"] = "on"
	pcfg.MaxConns = 4
	// NewWithConfig connects lazily: a database down now is reported by the
	// health check and the queries, not by a failed instance.
	if d.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
		d.err = fmt.Errorf("store.dsn: %w", err)
		return d, nil
	}
	if d.store, err = store.New(d.pool, store.DefaultConfig()); err != nil {
		d.pool.Close()
		d.err = err
	}
	return d, nil
}

// Dispose closes the instance's connections.
func (d *Datasource) Dispose() {
	if d.pool != nil {
		d.pool.Close()
	}
}

// CheckHealth reports whether the store answers and which schema version
// it has.
func (d *Datasource) CheckHealth(ctx context.Context, _ *backend.CheckHealthRequest) (*backend.CheckHealthResult, error) {
	fail := func(msg string) (*backend.CheckHealthResult, error) {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: msg}, nil
	}
	if d.err != nil {
		return fail("Settings: " + d.err.Error())
	}
	where := d.store.String()
	v, err := d.store.SchemaVersion(ctx)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return fail(fmt.Sprintf("Store %s has no errorownership schema: point store.dsn at the database the collector's errorownership_store extension names; the collector creates the schema when it starts.", where))
	case err != nil:
		return fail(fmt.Sprintf("Cannot read the store %s: %v", where, err))
	case v == 0:
		return fail(fmt.Sprintf("Store %s has no errorownership schema yet: start the collector with a store section on it; it creates the schema.", where))
	case v < minSchemaVersion:
		return fail(fmt.Sprintf("Store %s has schema version %d; this plugin reads version %d or later: upgrade the collector, which migrates the store when it starts.", where, v, minSchemaVersion))
	}
	wanted := store.SchemaVersionWanted()
	msg := fmt.Sprintf("Store %s: schema version %d.", where, v)
	switch {
	case v < wanted:
		msg += fmt.Sprintf(" Version %d adds indexes for the dashboards' reads of some services: upgrade the collector, which migrates the store when it starts.", wanted)
	case v > wanted:
		msg += fmt.Sprintf(" This plugin knows version %d: upgrade it to match the collector.", wanted)
	}
	details, _ := json.Marshal(map[string]int64{"schemaVersion": v, "schemaVersionWanted": wanted})
	return &backend.CheckHealthResult{Status: backend.HealthStatusOk, Message: msg, JSONDetails: details}, nil
}

// QueryData answers each query by its type.
func (d *Datasource) QueryData(ctx context.Context, req *backend.QueryDataRequest) (*backend.QueryDataResponse, error) {
	resp := backend.NewQueryDataResponse()
	for _, q := range req.Queries {
		resp.Responses[q.RefID] = d.query(ctx, q)
	}
	return resp, nil
}

func (d *Datasource) query(ctx context.Context, q backend.DataQuery) backend.DataResponse {
	if d.err != nil {
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream, "Settings: "+d.err.Error())
	}
	var m Query
	if err := json.Unmarshal(q.JSON, &m); err != nil {
		return backend.ErrDataResponse(backend.StatusBadRequest, "the query is not the JSON this plugin reads: "+err.Error())
	}
	if m.QueryType == "" {
		m.QueryType = q.QueryType
	}
	m.Service = strings.TrimSpace(m.Service)
	var frames data.Frames
	var err error
	switch m.QueryType {
	case QueryServiceGraph:
		frames, err = d.serviceGraph(ctx, q.TimeRange, m.Service)
	case QueryEdgeModel:
		frames, err = d.edgeModel(ctx, m.Service)
	case QueryHints:
		if m.Service == "" {
			return backend.ErrDataResponse(backend.StatusBadRequest, "hints are a service's: choose the service in the query editor")
		}
		frames, err = d.hints(ctx, m.Service)
	default:
		return backend.ErrDataResponse(backend.StatusBadRequest, fmt.Sprintf("queryType %q is not one this plugin knows; use %s, %s or %s", m.QueryType, QueryServiceGraph, QueryEdgeModel, QueryHints))
	}
	if err != nil {
		return backend.ErrDataResponseWithSource(backend.StatusInternal, backend.ErrorSourceDownstream, err.Error())
	}
	return backend.DataResponse{Frames: frames}
}

func (d *Datasource) serviceGraph(ctx context.Context, tr backend.TimeRange, service string) (data.Frames, error) {
	from, to := tr.From, tr.To
	in := graphInput{Seconds: to.Sub(from).Seconds(), Service: service}
	var err error
	if in.Amplification, err = d.store.Amplification(ctx, from, to); err != nil {
		return nil, err
	}
	if in.Accuracy, err = d.store.ClaimAccuracy(ctx, from, to); err != nil {
		return nil, err
	}
	if in.Edges, err = d.store.ServiceEdges(ctx, from, to); err != nil {
		return nil, err
	}
	if in.Model, err = d.model(ctx, ""); err != nil {
		return nil, err
	}
	nodes, edges := serviceGraphFrames(in)
	return data.Frames{nodes, edges}, nil
}

// model reads the edge model as the collector reads it for its verdicts
// and hints: store.ModelWindow back from now, decaying with the half-life.
func (d *Datasource) model(ctx context.Context, service string) ([]store.EdgeEstimate, error) {
	m := d.settings.Model
	since := d.now().Add(-store.ModelWindow(m.HalfLife))
	if service == "" {
		return d.store.EdgeModel(ctx, since, m.HalfLife, m)
	}
	return d.store.EdgesFor(ctx, service, since, m.HalfLife, m)
}

func (d *Datasource) edgeModel(ctx context.Context, service string) (data.Frames, error) {
	model, err := d.model(ctx, service)
	if err != nil {
		return nil, err
	}
	return data.Frames{edgeModelFrame(model)}, nil
}

func (d *Datasource) hints(ctx context.Context, service string) (data.Frames, error) {
	at := d.now()
	edges, err := d.model(ctx, service)
	if err != nil {
		return nil, err
	}
	doc, err := hintsDocument(service, edges, at, &d.settings)
	if err != nil {
		return nil, fmt.Errorf("hints for %q: %w", service, err)
	}
	return hintsFrames(doc)
}

// CallResource serves the query editor: GET services lists the services
// seen in the last day.
func (d *Datasource) CallResource(ctx context.Context, req *backend.CallResourceRequest, sender backend.CallResourceResponseSender) error {
	reply := func(status int, body any) error {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		return sender.Send(&backend.CallResourceResponse{Status: status,
			Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: b})
	}
	if req.Path != "services" {
		return reply(http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no resource %q; the plugin serves services", req.Path)})
	}
	if req.Method != http.MethodGet {
		return reply(http.StatusMethodNotAllowed, map[string]string{"error": "services is read with GET"})
	}
	if d.err != nil {
		return reply(http.StatusBadRequest, map[string]string{"error": "Settings: " + d.err.Error()})
	}
	now := d.now()
	amps, err := d.store.Amplification(ctx, now.Add(-servicesWindow), now.Add(time.Minute))
	if err != nil {
		return reply(http.StatusBadGateway, map[string]string{"error": err.Error()})
	}
	services := make([]string, 0, len(amps))
	for _, a := range amps {
		services = append(services, a.Service)
	}
	return reply(http.StatusOK, services)
}
