//! Schemas on the wire: the `Schema` a producer or consumer announces, and `GetSchema`.
//! Pure data; what a schema means for payloads is the Python package's business.

use super::pb::{self, base_command::Type, BaseCommand};

/// A schema as the registry stores it: name, type (the wire `Schema.Type` number), definition
/// bytes and properties.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchemaInfo {
    pub name: String,
    pub kind: i32,
    pub data: Vec<u8>,
    pub properties: Vec<(String, String)>,
}

impl SchemaInfo {
    /// The wire `Schema`.
    pub fn to_pb(&self) -> pb::Schema {
        pb::Schema {
            name: self.name.clone(),
            schema_data: self.data.clone().into(),
            r#type: self.kind,
            properties: super::commands::key_values(&self.properties),
        }
    }

    /// From the wire `Schema`.
    pub fn from_pb(s: &pb::Schema) -> SchemaInfo {
        SchemaInfo {
            name: s.name.clone(),
            kind: s.r#type,
            data: s.schema_data.to_vec(),
            properties: s
                .properties
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect(),
        }
    }
}

/// `GetSchema` of `topic`: the latest version, or `version` (the registry's 8-byte version).
pub fn get_schema(topic: &str, version: Option<Vec<u8>>, request_id: u64) -> BaseCommand {
    BaseCommand {
        r#type: Type::GetSchema as i32,
        get_schema: Some(pb::CommandGetSchema {
            request_id,
            topic: topic.to_string(),
            schema_version: version.map(Into::into),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{commands, frame};
    use bytes::BytesMut;

    #[test]
    fn schema_info_round_trips_through_the_wire_type() {
        let info = SchemaInfo {
            name: "Order".into(),
            kind: pb::schema::Type::Avro as i32,
            data: br#"{"type":"record"}"#.to_vec(),
            properties: vec![("k".into(), "v".into())],
        };
        assert_eq!(SchemaInfo::from_pb(&info.to_pb()), info);
    }

    #[test]
    fn get_schema_round_trips_and_names_its_request() {
        let cmd = get_schema("persistent://public/default/t", Some(vec![0, 0, 0, 0, 0, 0, 0, 1]), 5);
        let mut buf = BytesMut::new();
        frame::encode_command(&cmd, &mut buf);
        let back = frame::decode(&mut buf, 1 << 20).unwrap().unwrap().command;
        assert_eq!(back, cmd);
        let mut resp = BaseCommand {
            r#type: Type::GetSchemaResponse as i32,
            ..Default::default()
        };
        resp.get_schema_response = Some(pb::CommandGetSchemaResponse {
            request_id: 5,
            ..Default::default()
        });
        assert_eq!(commands::response_request_id(&resp), Some(5));
    }
}
