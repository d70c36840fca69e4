// Package schemareg is Sluice's schema registry: Confluent Schema
// Registry's REST API as serializers and tools use it (the Java, Go and
// Python serializers, confluent-kafka-python's SchemaRegistryClient, kcat
// -r), over Confluent's own storage format in the compacted topic
// _schemas, so that a _schemas topic copied from a Confluent cluster reads
// as it is (records.go).
//
// # The REST API (http.go)
//
// Subjects and versions (GET /subjects, /subjects/{s}/versions,
// /subjects/{s}/versions/{v}[/schema|/referencedby], v = N or latest),
// schemas by id (GET /schemas/ids/{id}[/schema|/versions|/subjects],
// /schemas, /schemas/types), registration (POST /subjects/{s}/versions,
// idempotent: the same schema answers its id; the same schema under
// another subject keeps its id), lookup (POST /subjects/{s}), compatibility
// (POST /compatibility/subjects/{s}/versions/{v}, and .../versions for
// every version the subject's level compares with; ?verbose=true lists
// the problems), levels (GET/PUT/DELETE /config and /config/{s}: NONE,
// BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL,
// FULL_TRANSITIVE), modes (GET/PUT /mode, GET/PUT/DELETE /mode/{s}:
// READWRITE, READONLY), soft and hard deletes (DELETE /subjects/{s} and
// /subjects/{s}/versions/{v}, ?permanent=true after a soft delete),
// references between schemas (Avro named types, .proto imports, JSON
// Schema $refs; a referenced version cannot be deleted). Errors are
// Confluent's bodies {"error_code":40401,"message":"..."} with its codes
// (errors.go) and the media type application/vnd.schemaregistry.v1+json.
// Request bodies are bounded (Config.MaxRequestBytes), schemas too
// (schema.MaxSchemaBytes, reference depth and count).
//
// # One writer
//
// Every registry reads _schemas into an in-memory view (state.go) and
// answers reads from it. Writes are made by one registry, the leader
// (Config.Leader: a ZooKeeper election in a cluster, see
// appliance/schemaregistry.go; the only one on a single node): before each
// write it appends a NOOP record and reads up to it, then checks, allocates
// the next id (the largest seen + 1) and version, appends, and waits until
// its view has applied what it wrote. A registry that does not lead
// forwards writes to the leader's URL and, before answering, waits until
// its own view has read the offset the leader reports
// (X-Sluice-Schemas-Offset), so a client reads its own writes on any host.
//
// # Use from the console and other packages
//
// Besides Handler, a *Registry answers in process, without HTTP:
//
//	reg.Subjects()                          // []SubjectInfo: type, latest version and id, compatibility
//	reg.Version(subject, v, deleted)        // one version (-1 = latest), or nil
//	reg.CheckCompatibility(subject, v, req) // problems of a draft schema (nil = compatible)
//	reg.Register(ctx, subject, req)         // register (leader only; others forward over HTTP)
//	reg.DeleteVersion / DeleteSubject / SetConfig / SetMode
//	reg.SchemaByID, reg.SchemaBySubject     // a serde.Source, for decoding records
//
// Records in the Confluent wire format are decoded and encoded by package
// schemareg/serde with any serde.Source: the Registry itself, or
// serde.NewHTTPSource for a registry elsewhere. appliance.SchemaSource(app)
// is the Source of a running appliance (nil-safe while its registry is
// starting or disabled). Package schemareg/schema parses the three schema
// types and holds the compatibility rules.
package schemareg
