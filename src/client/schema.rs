//! The schema registry as the client sees it: `Client::get_schema`.

use super::error::{Error, Result};
use super::handle::Client;
use super::topic::TopicName;
use crate::net::NetError;
use crate::protocol::pb::ServerError;
use crate::protocol::schema::{self, SchemaInfo};

impl Client {
    /// The schema of `topic` registered under `version` (the registry's version bytes), or its
    /// latest when `version` is None, with the version it is stored under. None when the topic
    /// has no schema (or not that version).
    pub async fn get_schema(&self, topic: &str, version: Option<Vec<u8>>) -> Result<Option<(SchemaInfo, Vec<u8>)>> {
        self.shared.check_open()?;
        let topic = TopicName::parse(topic)?;
        let conn = match crate::net::lookup::broker_for(&self.shared.pool, topic.as_str()).await {
            // A web service's lookup already says the topic does not exist.
            Err(NetError::Server {
                code: ServerError::TopicNotFound,
                ..
            }) => return Ok(None),
            found => found?,
        };
        let frame = conn
            .request(|id| schema::get_schema(topic.as_str(), version.clone(), id))
            .await?;
        let resp = frame
            .command
            .get_schema_response
            .ok_or_else(|| NetError::UnexpectedResponse("GetSchemaResponse without its body".into()))?;
        if let Some(code) = resp.error_code {
            if code == ServerError::TopicNotFound as i32 {
                return Ok(None);
            }
            return Err(Error::from_code(code, resp.error_message.as_deref().unwrap_or("")));
        }
        let Some(s) = resp.schema else {
            return Ok(None);
        };
        let stored = resp.schema_version.map(|v| v.to_vec()).or(version).unwrap_or_default();
        Ok(Some((SchemaInfo::from_pb(&s), stored)))
    }
}
